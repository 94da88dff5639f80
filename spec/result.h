// Result<T>: a value or an error message, carried up to the one layer that tells the user.
// Used by every torch-free layer (spec, data) and the backend; the trainer fails fast instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace shardscope {

/// What went wrong, phrased for the user: names the field or file and the fix.
struct Error {
  std::string message;
  /// The same request would be refused again (a constraint, a value out of range, a row too
  /// big): retrying cannot help. False for what may pass (a full disk, a lost connection, a busy
  /// writer) and when unknown.
  bool permanent = false;
};

/// An error value for `return fail("...")` in any Result-returning function.
inline Error fail(std::string message) { return Error{std::move(message)}; }
/// An error that retrying the same request cannot cure (Error::permanent).
inline Error fail_permanent(std::string message) { return Error{std::move(message), true}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : m_state(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error)
      : m_state(std::in_place_index<1>, std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return m_state.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(m_state); }
  const T& value() const& { return std::get<0>(m_state); }
  T&& value() && { return std::get<0>(std::move(m_state)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(m_state); }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> m_state;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error)
      : m_error(std::move(error)), m_ok(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return m_ok; }
  explicit operator bool() const { return m_ok; }
  const Error& error() const { return m_error; }
  const std::string& message() const { return m_error.message; }

 private:
  Error m_error;
  bool m_ok = true;
};

/// Success for Result<void>.
inline Result<void> ok() { return {}; }

}  // namespace shardscope
