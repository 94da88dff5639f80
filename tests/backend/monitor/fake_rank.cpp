// fake_rank: one rank of a run, for the monitor's tests. Writes protocol-v1 events on stdout
// and human lines on stderr, one step every INTERVAL_MS, and ends the way MODE says:
//   normal   done complete after STEPS steps           hang   steps until SIGTERM
//   crash    exits 3 at step AT, no done               oom    error kind oom at step AT, exit 1
//   garbage  a malformed line every 7 steps, done      partial  each line in two writes
//   huge     at step AT a 3 MiB line on stdout and 2 MiB of \r-separated progress on stderr
//            without a newline (a tqdm bar), then done
// SIGTERM (any mode): done stopped at the next step, exit 0.
//   fake_rank RANK MODE STEPS INTERVAL_MS [AT]
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "spec/events.h"

namespace spec = shardscope::spec;

namespace {

volatile std::sig_atomic_t g_stop = 0;
extern "C" void onTerm(int /*sig*/) { g_stop = 1; }

void sleepMs(int ms) { usleep(static_cast<useconds_t>(ms) * 1000); }

// `partial`: the line goes out in two writes with a pause between, so a reader sees half a line.
void writePartial(const spec::Event& event, int pauseMs) {
  const std::string line = spec::encode_event(event) + "\n";
  const std::size_t half = line.size() / 2;
  std::fwrite(line.data(), 1, half, stdout);
  std::fflush(stdout);
  sleepMs(pauseMs);
  std::fwrite(line.data() + half, 1, line.size() - half, stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: fake_rank RANK MODE STEPS INTERVAL_MS [AT]\n");
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const std::string mode = argv[2];
  const int steps = std::atoi(argv[3]);
  const int intervalMs = std::atoi(argv[4]);
  const int at = argc > 5 ? std::atoi(argv[5]) : steps / 2;
  std::signal(SIGTERM, onTerm);
  spec::EventWriter out(rank, stdout);
  std::int64_t seq = 0;
  auto emit = [&](const spec::Payload& body) {
    if (mode == "partial") {
      writePartial({{spec::kProtocolVersion, rank, seq++, spec::unix_time_now()}, body},
                   intervalMs);
    } else {
      out.write(body);
    }
  };
  emit(spec::HelloEvent{2, 2, "fake", {{"shardtrain", "fake"}}, 1000, 100, 1 << 20});
  std::fprintf(stderr, "rank %d: starting\n", rank);
  for (int step = 1; mode == "hang" || step <= steps; ++step) {
    if (g_stop) {
      emit(spec::DoneEvent{spec::DoneStatus::stopped, {}, false, step - 1});
      return 0;
    }
    sleepMs(intervalMs);
    if (rank == 0) emit(spec::StepEvent{step, 3.0 / step, 1e-3, 0.5, 1000, 0.2, 10, 10});
    emit(spec::MemEvent{step, 1 << 20, 2 << 20, 3 << 20, 4 << 20});
    std::fprintf(stderr, "rank %d: step %d\n", rank, step);
    std::fflush(stderr);
    if (mode == "garbage" && step % 7 == 0) {
      std::printf("this is not json, step %d\n", step);
      std::fflush(stdout);
    }
    if (mode == "huge" && step == at) {
      const std::string big(3 << 20, 'x');
      std::printf("{\"v\":1,\"ev\":\"log\",\"message\":\"%s\"}\n", big.c_str());
      std::fflush(stdout);
      for (int i = 0; i < 2 * 1024 * 1024 / 64; ++i)
        std::fprintf(stderr, "\r%3d%%|%-56s|", i % 100, "########");
      std::fprintf(stderr, "\n");
      std::fflush(stderr);
    }
    if (mode == "crash" && step == at) {
      std::fprintf(stderr, "rank %d: fatal: segmentation fault in step %d\n", rank, step);
      return 3;
    }
    if (mode == "oom" && step == at) {
      // With the caching allocator's view and the snapshot trace.memory_on_oom names.
      emit(
          spec::ErrorEvent{spec::ErrorKind::oom, "CUDA out of memory", "lower the batch size",
                           spec::OomMemory{"cuda", 2147483648, 1073741824, 1610612736, std::nullopt,
                                           1610612736, 268435456, 4294967296, 536870912,
                                           "memory/rank-" + std::to_string(rank) + ".pickle"}});
      std::fprintf(stderr, "rank %d: CUDA out of memory\n", rank);
      return 1;
    }
  }
  emit(spec::DoneEvent{spec::DoneStatus::complete, {0.25}, false, steps});
  return 0;
}
