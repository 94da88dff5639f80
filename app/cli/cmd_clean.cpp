// `rm`, `archive` and `gc`: disk and clean-up (backend/lifecycle/runcleanup.h).
//   rm RUN... [--dry-run] [--force-rows]   removes runs: their folders (here or over SSH), then
//                                          their rows; a running run is refused
//   archive RUN... [--undo]                hides runs from `ls` (and the dashboard) or shows them
//   gc --keep-best N STUDY [--dry-run]     keeps the best N trials' checkpoints, removes the rest
// Nothing asks for confirmation: the bytes freed are printed (and --dry-run shows them first).
#include <QHash>
#include <QJsonArray>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"
#include "backend/lifecycle/runcleanup.h"

namespace shardscope::cli {
namespace {

std::string bytesText(qint64 bytes) {
  return backend::humanBytes(bytes).toStdString() + " (" + std::to_string(bytes) + " bytes)";
}

void rmVerb(const Globals& g, const std::vector<std::string>& names, bool dryRun, bool forceRows) {
  auto reader = openReader(g);
  std::vector<backend::RunRecord> runs;
  runs.reserve(names.size());
  for (const auto& name : names) runs.push_back(findRun(reader, name));
  std::unique_ptr<backend::RunStore> store;
  if (!dryRun) store = openStore(g);
  backend::RunCleaner cleaner;
  qint64 total = 0;
  bool allDone = true;
  for (const auto& run : runs) {
    QJsonObject o{{"run", run.name}, {"dry_run", dryRun}};
    const backend::RunPlace place = cleaner.place(run);
    if (dryRun) {
      auto disk = cleaner.measure(run);
      if (!disk) {
        allDone = false;
        std::cerr << "error: run " << run.name.toStdString() << ": " << disk.message() << '\n';
        continue;
      }
      total += disk->bytes;
      o["freed_bytes"] = disk->bytes;
      o["rows_deleted"] = false;
      o["left"] = place.unreachable;
      if (g.json) {
        printJson(o);
      } else {
        std::cout << "would remove " << run.name.toStdString() << ": " << bytesText(disk->bytes)
                  << (place.unreachable.isEmpty()
                          ? std::string()
                          : "; would leave " + place.unreachable.toStdString())
                  << '\n';
      }
      continue;
    }
    auto removed = cleaner.removeRun(*store, run, forceRows);
    if (!removed) {
      allDone = false;
      std::cerr << "error: " << removed.message() << '\n';
      continue;
    }
    total += removed->freedBytes;
    if (!removed->left.isEmpty()) allDone = allDone && removed->rowsDeleted;
    o["freed_bytes"] = removed->freedBytes;
    o["rows_deleted"] = removed->rowsDeleted;
    o["left"] = removed->left;
    if (g.json) {
      printJson(o);
      continue;
    }
    std::cout << (removed->rowsDeleted ? "removed " : "kept ") << run.name.toStdString() << ": "
              << bytesText(removed->freedBytes) << " freed";
    if (!removed->left.isEmpty()) {
      std::cout << "; left " << removed->left.toStdString()
                << (removed->rowsDeleted ? " (its rows were deleted: --force-rows)"
                                         : " (its rows are kept; --force-rows deletes them)");
    }
    std::cout << '\n';
  }
  if (!g.json && runs.size() > 1) {
    std::cout << (dryRun ? "would free " : "freed ") << bytesText(total) << " in all\n";
  }
  if (!allDone) exitWith(kExitError);
}

void archiveVerb(const Globals& g, const std::vector<std::string>& names, bool undo) {
  auto reader = openReader(g);
  std::vector<backend::RunRecord> runs;
  runs.reserve(names.size());
  for (const auto& name : names) runs.push_back(findRun(reader, name));
  auto store = openStore(g);
  for (const auto& run : runs) {
    orExit(store->setArchived(run.id, !undo).get());
    if (g.json) {
      printJson({{"run", run.name}, {"archived", !undo}});
    } else {
      std::cout << (undo ? "unarchived " : "archived ") << run.name.toStdString() << '\n';
    }
  }
}

void gcVerb(const Globals& g, const std::string& studyName, int keep, bool dryRun) {
  if (keep < 0) exitWith(kExitUsage, "--keep-best: must be 0 or more");
  auto reader = openReader(g);
  const auto study = findStudy(reader, studyName);
  const auto trials = orExit(reader.trials(study.id));
  backend::RunCleaner cleaner;
  const auto gc = orExit(backend::keepBestCheckpoints(cleaner, study, trials, keep, dryRun));
  QHash<qint64, QString> names;
  for (const auto& t : trials) names[t.id] = t.name;
  if (g.json) {
    QJsonArray kept;
    QJsonArray freed;
    for (const qint64 id : gc.kept) kept.append(names[id]);
    for (const qint64 id : gc.freed) freed.append(names[id]);
    printJson({{"study", study.name},
               {"dry_run", dryRun},
               {"kept", kept},
               {"freed", freed},
               {"freed_bytes", gc.freedBytes},
               {"left", QJsonArray::fromStringList(gc.left)}});
  } else {
    QStringList kept;
    for (const qint64 id : gc.kept) kept << names[id];
    std::cout << "kept the checkpoints of "
              << (kept.isEmpty() ? "no trial" : kept.join(", ").toStdString()) << '\n';
    for (const qint64 id : gc.freed) {
      std::cout << (dryRun ? "would remove the checkpoints of " : "removed the checkpoints of ")
                << names[id].toStdString() << '\n';
    }
    for (const QString& line : gc.left) std::cout << "left " << line.toStdString() << '\n';
    std::cout << (dryRun ? "would free " : "freed ") << bytesText(gc.freedBytes) << '\n';
  }
  if (!gc.left.isEmpty()) exitWith(kExitError);
}

}  // namespace

void addCleanVerbs(CLI::App& app, Globals& g) {
  struct RmArgs {
    std::vector<std::string> runs;
    bool dryRun = false;
    bool forceRows = false;
  };
  auto rmArgs = std::make_shared<RmArgs>();
  CLI::App* rm = app.add_subcommand(
      "rm", "Delete runs: their folders (here or over SSH) and their rows; never a running run");
  rm->add_option("RUN", rmArgs->runs, "Run ids or names")->required();
  rm->add_flag("--dry-run", rmArgs->dryRun, "Print what would be freed; remove nothing");
  rm->add_flag("--force-rows", rmArgs->forceRows,
               "Delete the rows of a run whose files are on a machine this one cannot reach "
               "(the files stay there)");
  rm->callback([&g, rmArgs] { rmVerb(g, rmArgs->runs, rmArgs->dryRun, rmArgs->forceRows); });

  struct ArchiveArgs {
    std::vector<std::string> runs;
    bool undo = false;
  };
  auto archiveArgs = std::make_shared<ArchiveArgs>();
  CLI::App* archive = app.add_subcommand(
      "archive", "Hide runs from `ls` and the dashboard (kept on disk); --undo shows them again");
  archive->add_option("RUN", archiveArgs->runs, "Run ids or names")->required();
  archive->add_flag("--undo", archiveArgs->undo, "Bring archived runs back");
  archive->callback([&g, archiveArgs] { archiveVerb(g, archiveArgs->runs, archiveArgs->undo); });

  struct GcArgs {
    std::string study;
    int keep = -1;
    bool dryRun = false;
  };
  auto gcArgs = std::make_shared<GcArgs>();
  CLI::App* gc = app.add_subcommand(
      "gc", "Keep the checkpoints of a study's best N trials (by its objective); remove the rest");
  gc->add_option("STUDY", gcArgs->study, "Study id or name (a sweep)")->required();
  gc->add_option("--keep-best", gcArgs->keep, "How many of the best trials keep theirs")
      ->required()
      ->type_name("N");
  gc->add_flag("--dry-run", gcArgs->dryRun, "Print what would be freed; remove nothing");
  gc->callback([&g, gcArgs] { gcVerb(g, gcArgs->study, gcArgs->keep, gcArgs->dryRun); });
}

}  // namespace shardscope::cli
