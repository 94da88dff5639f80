// `samples RUN [--step N]`: what a run's model answered to its probes (eval.probes), one line per
// `sample` event: the step, the probe, the scores when it has a reference, the generated text.
// RUN is a run of the run log (id or name) or a run directory (its events-rank-0.jsonl). --json:
// one object per sample.
#include <QFileInfo>

#include <cstdio>
#include <iostream>
#include <optional>

#include "app/cli/cli_common.h"
#include "backend/monitor/samples.h"

namespace shardscope::cli {
namespace {

struct SamplesOptions {
  std::string run;
  qint64 step = -1;  // -1: every step
};

// A text on one line: newlines and tabs escaped, so each sample stays one line.
std::string oneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out;
}

// A score with two decimals, or "-" without a reference.
std::string score(const std::optional<double>& value) {
  if (!value) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", *value);
  return text;
}

void samplesVerb(const Globals& g, const SamplesOptions& o) {
  const QString asPath = QString::fromStdString(o.run);
  const auto step = o.step >= 0 ? std::optional<qint64>(o.step) : std::nullopt;
  std::vector<spec::SampleEvent> samples;
  if (QFileInfo(asPath).isDir()) {
    samples = orExit(backend::samplesOfRunDir(asPath, step));
  } else {
    auto reader = openReader(g);
    const auto run = findRun(reader, o.run);
    samples = orExit(backend::samplesOfRun(reader, run.id, step));
  }
  if (g.json) {
    for (const auto& s : samples) printJson(backend::sampleToJson(s));
    return;
  }
  if (samples.empty()) {
    std::cout << (step ? "no samples at step " + std::to_string(*step)
                       : std::string("no samples (the run has no eval.probes, or no evaluation "
                                     "has run yet)"))
              << '\n';
    return;
  }
  std::printf("%-6s %-16s %-5s %5s %5s %6s  %s\n", "step", "probe", "match", "f1", "cer", "tokens",
              "text");
  for (const auto& s : samples) {
    const std::string match = s.exact_match ? (*s.exact_match ? "yes" : "no") : "-";
    const std::string f1 = score(s.f1);
    const std::string cer = score(s.cer);
    std::printf("%-6lld %-16s %-5s %5s %5s %6lld  %s\n", static_cast<long long>(s.step),
                s.probe.c_str(), match.c_str(), f1.c_str(), cer.c_str(),
                static_cast<long long>(s.tokens), oneLine(s.text).c_str());
  }
}

}  // namespace

void addSamplesVerb(CLI::App& app, Globals& g) {
  auto o = std::make_shared<SamplesOptions>();
  CLI::App* samples = app.add_subcommand(
      "samples", "A run's answers to its probes (eval.probes): text and scores per step");
  samples->add_option("RUN", o->run, "Run id or name, or a run directory")->required();
  samples->add_option("--step", o->step, "Only the answers of this step")
      ->check(CLI::NonNegativeNumber);
  samples->callback([&g, o] { samplesVerb(g, *o); });
}

}  // namespace shardscope::cli
