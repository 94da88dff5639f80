#include "trainer/dist/direct.h"

#include <functional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace shardscope::dist {
namespace {

// The sends and receives of one exchange; wait() waits for all of them (the sends too, so the
// caller may reuse the sent buffers afterwards), then runs the exchange's last local step.
class DirectWork final : public c10d::Work {
 public:
  DirectWork(std::vector<c10::intrusive_ptr<c10d::Work>> parts, std::function<void()> then)
      : m_parts(std::move(parts)), m_then(std::move(then)) {}

  // True once waited: the engine only ever waits these works, never polls them.
  bool isCompleted() override { return m_done; }

  bool wait(std::chrono::milliseconds timeout) override {
    if (m_done) return true;
    for (auto& part : m_parts) part->wait(timeout);  // a lost peer throws here
    m_parts.clear();
    if (m_then) m_then();
    m_done = true;
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> m_parts;
  std::function<void()> m_then;
  bool m_done = false;
};

c10::intrusive_ptr<c10d::Work> send(const Exchange& x, const at::Tensor& t, int to) {
  std::vector<at::Tensor> one{t};
  return x.backend.send(one, to, x.tag);
}

c10::intrusive_ptr<c10d::Work> recv(const Exchange& x, const at::Tensor& t, int from) {
  std::vector<at::Tensor> one{t};
  return x.backend.recv(one, from, x.tag);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> direct_all_gather(const Exchange& x, at::Tensor& out,
                                                 const at::Tensor& in) {
  const auto n = in.numel();
  auto flat = out.view({-1});                                       // (size * n)
  auto mine = flat.narrow(0, x.rank * n, n);                        // (n) this rank's place
  if (mine.data_ptr() != in.data_ptr()) mine.copy_(in.view({-1}));  // unless `in` is that place
  std::vector<c10::intrusive_ptr<c10d::Work>> parts;
  for (int peer = 0; peer < x.size; ++peer) {
    if (peer == x.rank) continue;
    parts.push_back(recv(x, flat.narrow(0, peer * n, n), peer));
  }
  for (int peer = 0; peer < x.size; ++peer) {
    if (peer != x.rank) parts.push_back(send(x, mine, peer));
  }
  return c10::make_intrusive<DirectWork>(std::move(parts), nullptr);
}

c10::intrusive_ptr<c10d::Work> direct_reduce_scatter(const Exchange& x, at::Tensor& out,
                                                     at::Tensor& in) {
  const auto n = in.numel() / x.size;
  auto flat = in.view({-1});
  auto mine = flat.narrow(0, x.rank * n, n);  // (n) this rank's chunk: the sum lands here
  std::vector<at::Tensor> got(static_cast<std::size_t>(x.size));
  std::vector<c10::intrusive_ptr<c10d::Work>> parts;
  for (int peer = 0; peer < x.size; ++peer) {
    if (peer == x.rank) continue;
    got[static_cast<std::size_t>(peer)] = at::empty({n}, in.options());
    parts.push_back(recv(x, got[static_cast<std::size_t>(peer)], peer));
  }
  for (int peer = 0; peer < x.size; ++peer) {
    if (peer != x.rank) parts.push_back(send(x, flat.narrow(0, peer * n, n), peer));
  }
  got[static_cast<std::size_t>(x.rank)] = mine;
  out = mine;
  // ((c0 + c1) + c2) + ...: the first sum commutes, so ranks 0 and 1 add into their own chunk;
  // other ranks sum c0 + c1 ... into a received buffer and copy the total into theirs.
  auto add = [got = std::move(got), mine, rank = x.rank]() {
    const auto size = got.size();
    if (size == 1) return;  // a group of one (ProcessGroup's no_shortcut): the sum is `mine`
    if (rank <= 1) {
      mine.add_(got[static_cast<std::size_t>(1 - rank)]);  // c0 + c1
      for (std::size_t j = 2; j < size; ++j) mine.add_(got[j]);
      return;
    }
    const auto& acc = got[0];  // a received buffer, ours to overwrite (add_ writes through)
    for (std::size_t j = 1; j < size; ++j) acc.add_(got[j]);
    mine.copy_(acc);
  };
  return c10::make_intrusive<DirectWork>(std::move(parts), std::move(add));
}

}  // namespace shardscope::dist
