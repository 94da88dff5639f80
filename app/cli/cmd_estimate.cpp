// `estimate EXP.toml`: validates the experiment for the world size [launch] asks for and prints
// its shape (world size, micro-batch, accumulation), spec's per-rank memory estimate (the
// same numbers `shardtrain estimate` and the trainer's `hello` event give) and the budget a sweep
// holds it against, with the budget's source.
#include <QJsonDocument>
#include <QJsonObject>

#include <iostream>

#include "app/cli/cli_common.h"
#include "backend/sweep/trialrunner.h"
#include "spec/estimate.h"
#include "spec/model_shape.h"

namespace shardscope::cli {
namespace {

void estimateVerb(const Globals& g, const std::string& path,
                  const std::vector<std::string>& overrides) {
  spec::LoadOptions options;
  options.check_paths = false;  // the estimate does not read the data
  auto exp = spec::load_experiment(path, overrides, options);
  if (!exp) exitWith(kExitUsage, exp.message());
  auto valid = spec::validate_for_launch(*exp);
  if (!valid) exitWith(kExitUsage, path + ": " + valid.message());
  const int world = spec::launch_world_size(exp->launch);
  // A model folder the estimate cannot read is as bad as a bad field: nothing could start.
  auto estimate = spec::estimate_memory(*exp, world, exp->launch.nproc_per_node);
  if (!estimate) exitWith(kExitUsage, path + ": " + estimate.message());
  auto budget = backend::budgetFor(*exp);
  if (!budget) exitWith(kExitUsage, path + ": " + budget.message());
  const qint64 need = spec::budgeted_bytes(*estimate, *budget);
  QJsonObject o{
      {"world_size", world},
      {"nnodes", exp->launch.nnodes},
      {"nproc_per_node", exp->launch.nproc_per_node},
      {"micro_batch_size", qint64(spec::micro_batch_size_for(exp->train, world))},
      {"grad_accumulation_steps", qint64(spec::grad_accumulation_steps(exp->train, world))},
      {"params_total", qint64(estimate->params_total)},
      {"mem_per_rank", qint64(estimate->total)},
      {"memory",
       QJsonDocument::fromJson(QByteArray::fromStdString(spec::estimate_json(*estimate))).object()},
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
            << "params_total: " << estimate->params_total << '\n'
            << spec::format_estimate(*estimate) << spec::format_budget(*estimate, *budget);
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
  est->callback([&g, path, overrides] { estimateVerb(g, *path, *overrides); });
}

}  // namespace shardscope::cli
