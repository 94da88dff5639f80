// VERIFY_OK(result): a Qt Test check that a Result<T> succeeded, printing its message when not.
#pragma once

#include <QTest>
#include <string>

namespace shardscope::testing {

template <class R>
std::string why(const R& result) {
  return result.ok() ? std::string() : result.message();
}

}  // namespace shardscope::testing

#define VERIFY_OK(expr)                                                  \
  do {                                                                   \
    const auto& result_ = (expr);                                        \
    QVERIFY2(result_.ok(), ::shardscope::testing::why(result_).c_str()); \
  } while (false)
