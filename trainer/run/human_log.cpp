#include "trainer/run/human_log.h"

#include <cinttypes>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "trainer/base/fatal.h"

namespace shardscope::trainer {
namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string metrics_text(const std::map<std::string, double>& metrics) {
  std::string out;
  for (const auto& [name, value] : metrics)
    out += (out.empty() ? "" : ", ") + name + format(" %.4f", value);
  return out;
}

}  // namespace

std::string human_line(const spec::Payload& body, std::int64_t max_steps) {
  return std::visit(
      [max_steps](const auto& e) -> std::string {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, spec::HelloEvent>) {
          std::string line = "shardtrain";
          if (auto v = e.versions.find("shardtrain"); v != e.versions.end())
            line += " " + v->second;
          line += format(": %d ranks (%d on this node)", e.world_size, e.local_world_size);
          if (e.device) line += ", " + e.device->type + " \"" + e.device->name + "\"";
          if (auto t = e.versions.find("torch"); t != e.versions.end())
            line += ", torch " + t->second;
          if (auto b = e.versions.find("backend"); b != e.versions.end()) line += ", " + b->second;
          line += format("; %.2fM parameters, %.2fM trainable; estimate %.1f MiB per rank",
                         static_cast<double>(e.params_total) / 1e6,
                         static_cast<double>(e.params_trainable) / 1e6, mib(e.mem_estimate));
          if (e.pack_efficiency)
            line += format("; packed rows %.0f%% full", 100.0 * *e.pack_efficiency);
          return line;
        } else if constexpr (std::is_same_v<T, spec::StepEvent>) {
          std::string line = max_steps > 0 ? format("step %" PRId64 "/%" PRId64, e.step, max_steps)
                                           : format("step %" PRId64, e.step);
          line += format(" | loss %.4f | lr %.3g | grad norm %.3f | %.0f tokens/s", e.loss, e.lr,
                         e.grad_norm, e.tokens_per_s);
          if (e.mfu > 0) line += format(" | mfu %.1f%%", 100.0 * e.mfu);
          return line;
        } else if constexpr (std::is_same_v<T, spec::EvalEvent>) {
          return format("eval at step %" PRId64 ": ", e.step) + metrics_text(e.metrics);
        } else if constexpr (std::is_same_v<T, spec::MemEvent>) {
          std::string line = format("memory at step %" PRId64
                                    ": allocated %.1f MiB, peak %.1f MiB, resident %.1f MiB",
                                    e.step, mib(e.allocated), mib(e.peak), mib(e.rss));
          if (e.cuda_peak)
            line += format("; GPU allocated %.1f MiB, peak %.1f MiB",
                           mib(e.cuda_allocated.value_or(0)), mib(*e.cuda_peak));
          return line;
        } else if constexpr (std::is_same_v<T, spec::CkptEvent>) {
          return format("checkpoint at step %" PRId64 ": ", e.step) + e.path + " (" + e.kind + ")";
        } else if constexpr (std::is_same_v<T, spec::LogEvent>) {
          return e.level + ": " + e.message;
        } else if constexpr (std::is_same_v<T, spec::DoneEvent>) {
          std::string line = "done: " + std::string(spec::to_string(e.status));
          if (e.steps) line += format(" after %" PRId64 " steps", *e.steps);
          if (!e.objective.empty()) line += format(", objective %.4f", e.objective.front());
          return line;
        } else if constexpr (std::is_same_v<T, spec::SampleEvent>) {
          // One line per answer: the text's newlines shown as \n.
          std::string line = format("probe %s at step %" PRId64 ": \"", e.probe.c_str(), e.step);
          for (char c : e.text) line += c == '\n' ? std::string("\\n") : std::string(1, c);
          line += "\"";
          if (e.f1 && e.cer)
            line += format(" (exact match %s, f1 %.2f, cer %.2f)",
                           e.exact_match.value_or(false) ? "yes" : "no", *e.f1, *e.cer);
          return line;
        } else {
          return {};  // errors print their own lines (raise); phases are for the dashboard
        }
      },
      body);
}

void report(const spec::Payload& body, std::int64_t max_steps) {
  events().write(body);
  const auto line = human_line(body, max_steps);
  if (!line.empty()) say(line);
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace shardscope::trainer
