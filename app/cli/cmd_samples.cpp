// `samples RUN [--step N]`: what a run's model answered to its probes (eval.probes), one line per
// `sample` event: the step, the probe, the scores when it has a reference, the generated text.
// RUN is a run of the run log (id or name) or a run directory (its events-rank-0.jsonl). --json:
// one object per sample. Of a run of the run log, each line also shows the person's verdict on the
// answer (good, bad, or '-').
// `verdict RUN PROBE STEP good|bad|clear`: marks one answer (schema v11, backend/store/verdicts.h),
// for scripts; the GUI's Samples view writes the same rows.
#include <QFileInfo>
#include <QHash>
#include <QPair>

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

// (probe, step) -> the verdict on that answer.
using Verdicts = QHash<QPair<QString, qint64>, backend::Verdict>;

std::string verdictOf(const Verdicts& verdicts, const spec::SampleEvent& s) {
  const auto it = verdicts.constFind({QString::fromStdString(s.probe), s.step});
  return it == verdicts.constEnd() ? "-" : backend::verdictName(*it);
}

void samplesVerb(const Globals& g, const SamplesOptions& o) {
  const QString asPath = QString::fromStdString(o.run);
  const auto step = o.step >= 0 ? std::optional<qint64>(o.step) : std::nullopt;
  std::vector<spec::SampleEvent> samples;
  Verdicts verdicts;
  if (QFileInfo(asPath).isDir()) {
    samples = orExit(backend::samplesOfRunDir(asPath, step));
  } else {
    auto reader = openReader(g);
    const auto run = findRun(reader, o.run);
    samples = orExit(backend::samplesOfRun(reader, run.id, step));
    for (const auto& v : orExit(reader.verdicts(run.id)))
      verdicts.insert({v.probe, v.step}, v.verdict);
  }
  if (g.json) {
    for (const auto& s : samples) {
      QJsonObject object = backend::sampleToJson(s);
      const std::string verdict = verdictOf(verdicts, s);
      object.insert("verdict",
                    verdict == "-" ? QJsonValue() : QJsonValue(QString::fromStdString(verdict)));
      printJson(object);
    }
    return;
  }
  if (samples.empty()) {
    std::cout << (step ? "no samples at step " + std::to_string(*step)
                       : std::string("no samples (the run has no eval.probes, or no evaluation "
                                     "has run yet)"))
              << '\n';
    return;
  }
  std::printf("%-6s %-16s %-5s %5s %5s %6s %-7s  %s\n", "step", "probe", "match", "f1", "cer",
              "tokens", "verdict", "text");
  for (const auto& s : samples) {
    const std::string match = s.exact_match ? (*s.exact_match ? "yes" : "no") : "-";
    const std::string f1 = score(s.f1);
    const std::string cer = score(s.cer);
    std::printf("%-6lld %-16s %-5s %5s %5s %6lld %-7s  %s\n", static_cast<long long>(s.step),
                s.probe.c_str(), match.c_str(), f1.c_str(), cer.c_str(),
                static_cast<long long>(s.tokens), verdictOf(verdicts, s).c_str(),
                oneLine(s.text).c_str());
  }
}

struct VerdictOptions {
  std::string run;
  std::string probe;
  qint64 step = 0;
  std::string verdict;
};

// Marks (or clears) one answer, then prints the run's counts: "good 2, bad 1, good_rate 0.67".
void verdictVerb(const Globals& g, const VerdictOptions& o) {
  auto verdict = backend::parseVerdict(QString::fromStdString(o.verdict));
  if (!verdict) exitWith(kExitUsage, "verdict: " + verdict.message());
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const auto run = findRun(reader, o.run);
  orExit(store
             ->setVerdict(run.id, QString::fromStdString(o.probe), o.step, *verdict,
                          backend::verdictAuthor())
             .get());
  const auto counts = orExit(reader.verdictCounts(run.id));
  const auto rate = counts.goodRate();
  if (g.json) {
    printJson({{"run", run.name},
               {"good", counts.good},
               {"bad", counts.bad},
               {"good_rate", rate ? QJsonValue(*rate) : QJsonValue()}});
    return;
  }
  std::cout << run.name.toStdString() << ": good " << counts.good << ", bad " << counts.bad
            << ", good_rate " << (rate ? score(rate) : std::string("- (nothing marked)")) << '\n';
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

  auto v = std::make_shared<VerdictOptions>();
  CLI::App* verdict = app.add_subcommand(
      "verdict", "Mark a run's answer to a probe at a step good or bad (or clear the mark)");
  verdict->add_option("RUN", v->run, "Run id or name")->required();
  verdict->add_option("PROBE", v->probe, "The probe's id (as `samples RUN` shows it)")->required();
  verdict->add_option("STEP", v->step, "The step of the answer")
      ->required()
      ->check(CLI::NonNegativeNumber);
  verdict->add_option("VERDICT", v->verdict, "good, bad or clear")->required();
  verdict->footer("Example: shardscope-cli verdict exp-3 cat 200 good");
  verdict->callback([&g, v] { verdictVerb(g, *v); });
}

}  // namespace shardscope::cli
