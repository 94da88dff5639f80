// A rank that stalls outside every collective, as one waiting inside a CUDA call does: it joins
// its group with the peer watchdog on (GroupOptions::watch_peers, what a CUDA rank sets),
// all-reduces once, says "ready" on stderr and sleeps. tst_process_group stops a peer from
// outside and expects this rank to end with peer_lost, or, with every peer alive, to keep
// sleeping. Environment: torchrun's variables, and PROBE_TIMEOUT_S (the collective timeout).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/ATen.h>

#include "trainer/base/fatal.h"
#include "trainer/dist/process_group.h"

using namespace shardscope;

int main() {
  return trainer::run_guarded([] {
    auto rdzv = dist::rendezvous_from_env();
    SHARD_CHECK_OK(rdzv, spec::ErrorKind::config, "set torchrun's variables");
    trainer::set_event_rank(rdzv->rank);
    const char* timeout = std::getenv("PROBE_TIMEOUT_S");
    dist::GroupOptions options;
    options.timeout = std::chrono::seconds(timeout ? std::atoi(timeout) : 3);
    options.watch_peers = true;
    auto group = dist::ProcessGroup::create(*rdzv, options);
    auto t = at::ones({4});
    group.all_reduce_sum(t);
    std::fprintf(stderr, "ready %g\n", t[0].item<double>());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::minutes(10));
    return 0;
  });
}
