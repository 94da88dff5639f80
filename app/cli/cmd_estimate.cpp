// `estimate EXP.toml`: validates the experiment for the world size [launch] asks for and prints
// its shape (world size, micro-batch, accumulation), spec's per-rank memory estimate (the
// same numbers `shardtrain estimate` and the trainer's `hello` event give) and the budget a sweep
// holds it against, with the budget's source. Chat data's rows are bounded by what its samples
// hold (read as the trainer reads them; --no-data: by data.seq_len). The total is calibrated by
// what the run log's completed runs of the same kind measured (spec/calibration.h);
// --uncalibrated shows the raw one.
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <iostream>
#include <optional>

#include "app/cli/cli_common.h"
#include "backend/store/runreader.h"
#include "backend/sweep/trialrunner.h"
#include "data/inspect.h"
#include "spec/calibration.h"
#include "spec/estimate.h"
#include "spec/model_shape.h"

namespace shardscope::cli {
namespace {

// The run log's corrections; none when it does not exist yet (a first estimate needs none) or
// cannot be read (said on stderr: the figure is then the formulas').
spec::Calibrations calibrationsOf(const Globals& g) {
  const QString db = dbPath(g);
  if (!db.startsWith(QLatin1String("postgres")) && !QFileInfo::exists(db)) return {};
  auto reader = backend::RunReader::open(db);
  auto table = reader ? reader->memoryCalibrations() : Result<spec::Calibrations>(reader.error());
  if (!table) {
    std::cerr << "warning: " << table.message() << "; the estimate is uncalibrated\n";
    return {};
  }
  return *table;
}

// Chat data bounds the rows by what its samples hold (the trainer's hello does the same); data
// that cannot be read yet (not made, on another host) leaves the data.seq_len bound, said on
// stderr.
std::optional<spec::DataBound> dataBoundOf(const spec::Experiment& exp) {
  if (exp.data.format != "chat") return std::nullopt;
  auto bound = data::train_data_bound(exp);
  if (!bound) {
    std::cerr << "note: rows bounded by data.seq_len, the data not read: " << bound.message()
              << '\n';
    return std::nullopt;
  }
  return *bound;
}

void estimateVerb(const Globals& g, const std::string& path,
                  const std::vector<std::string>& overrides, bool uncalibrated, bool noData) {
  spec::LoadOptions options;
  options.check_paths = false;  // data that is not there yet leaves the seq_len bound
  auto exp = spec::load_experiment(path, overrides, options);
  if (!exp) exitWith(kExitUsage, exp.message());
  auto valid = spec::validate_for_launch(*exp);
  if (!valid) exitWith(kExitUsage, path + ": " + valid.message());
  const int world = spec::launch_world_size(exp->launch);
  const auto bound = noData ? std::nullopt : dataBoundOf(*exp);
  // A model folder the estimate cannot read is as bad as a bad field: nothing could start.
  auto raw =
      spec::estimate_memory(*exp, world, exp->launch.nproc_per_node, bound ? &*bound : nullptr);
  if (!raw) exitWith(kExitUsage, path + ": " + raw.message());
  auto budget = backend::budgetFor(*exp);
  if (!budget) exitWith(kExitUsage, path + ": " + budget.message());
  const spec::Calibration calibration =
      uncalibrated ? spec::Calibration{}
                   : spec::find_calibration(calibrationsOf(g), *exp, *raw, budget->gpu);
  const spec::MemoryEstimate estimate = spec::calibrated(*raw, calibration);
  const qint64 need = spec::budgeted_bytes(estimate, *budget);
  QJsonObject o{
      {"world_size", world},
      {"nnodes", exp->launch.nnodes},
      {"nproc_per_node", exp->launch.nproc_per_node},
      {"micro_batch_size", qint64(spec::micro_batch_size_for(exp->train, world))},
      {"grad_accumulation_steps", qint64(spec::grad_accumulation_steps(exp->train, world))},
      {"params_total", qint64(estimate.params_total)},
      {"mem_per_rank", qint64(estimate.total)},
      {"memory",
       QJsonDocument::fromJson(QByteArray::fromStdString(spec::estimate_json(estimate))).object()},
      {"calibration",
       QJsonObject{{"runs", calibration.runs},
                   {"ratio", calibration.ratio},
                   {"total_raw", qint64(estimate.total_raw)},
                   {"text", QString::fromStdString(spec::format_calibration(calibration))}}},
      {"budget", QJsonObject{{"bytes", qint64(budget->bytes)},
                             {"source", QString::fromStdString(budget->source)},
                             {"gpu", budget->gpu},
                             {"fits", budget->bytes <= 0 || need <= budget->bytes}}}};
  if (g.json) {
    printJson(o);
    return;
  }
  std::cout << path << ": valid for " << world << " rank(s) (" << exp->launch.nnodes << " x "
            << exp->launch.nproc_per_node << ")\n"
            << "micro_batch_size: " << o["micro_batch_size"].toInteger() << '\n'
            << "grad_accumulation_steps: " << o["grad_accumulation_steps"].toInteger() << '\n'
            << "params_total: " << estimate.params_total << '\n'
            << spec::format_estimate(estimate) << spec::format_budget(estimate, *budget)
            << (uncalibrated ? std::string("uncalibrated (--uncalibrated): the formulas' figure")
                             : spec::format_calibration(calibration))
            << '\n';
}

}  // namespace

void addEstimateVerb(CLI::App& app, Globals& g) {
  auto path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  CLI::App* est = app.add_subcommand("estimate", "Validate an experiment and print its shape");
  est->add_option("EXP", *path, "Experiment file (TOML)")->required();
  est->add_option("--set", *overrides, "Override a field: dotted.key=value (repeatable)")
      ->type_name("K=V")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto uncalibrated = std::make_shared<bool>(false);
  est->add_flag("--uncalibrated", *uncalibrated,
                "The formulas' figure, without the run log's correction from measured runs");
  auto noData = std::make_shared<bool>(false);
  est->add_flag("--no-data", *noData,
                "Bound the rows by data.seq_len without reading chat data (as the trainer does "
                "not: it bounds them by the samples it loads)");
  est->callback([&g, path, overrides, uncalibrated, noData] {
    estimateVerb(g, *path, *overrides, *uncalibrated, *noData);
  });
}

}  // namespace shardscope::cli
