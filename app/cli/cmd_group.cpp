// `group`: user-defined groups of runs in the run log (schema 12, backend/store/rungroups.h),
// beside sweeps, which are groups already. A run can be in several groups; deleting a group never
// deletes its runs.
//   group list                 every group with its run count
//   group show NAME            the group's runs
//   group create NAME          an empty group
//   group add NAME RUN...      adds runs (--create makes the group when it is new)
//   group rm NAME RUN...       takes runs out of it
//   group rename OLD NEW
//   group delete NAME          the group only; its runs stay
#include <QJsonArray>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/cli/cli_common.h"

namespace shardscope::cli {
namespace {

struct GroupArgs {
  std::string name;
  std::string to;
  std::vector<std::string> runs;
  bool create = false;
};

void checkName(const std::string& name) {
  if (auto r = backend::checkGroupName(QString::fromStdString(name)); !r) {
    exitWith(kExitUsage, "group: " + r.message());
  }
}

backend::GroupRecord findGroup(backend::RunReader& reader, const std::string& name) {
  const auto found = orExit(reader.group(QString::fromStdString(name)));
  if (!found) {
    exitWith(kExitError, "group: no group \"" + name +
                             "\" in the run log (shardscope-cli group list shows them)");
  }
  return *found;
}

void listGroups(const Globals& g) {
  auto reader = openReader(g);
  const auto groups = orExit(reader.groups());
  if (g.json) {
    QJsonArray array;
    for (const auto& group : groups) {
      array.append(
          QJsonObject{{"name", group.name}, {"runs", group.runs}, {"created_at", group.createdAt}});
    }
    printJson({{"groups", array}});
    return;
  }
  for (const auto& group : groups) {
    std::cout << group.name.toStdString() << '\t' << group.runs
              << (group.runs == 1 ? " run" : " runs") << '\n';
  }
}

void showGroup(const Globals& g, const std::string& name) {
  auto reader = openReader(g);
  const auto group = findGroup(reader, name);
  QJsonArray array;
  for (const qint64 id : orExit(reader.groupRuns(group.id))) {
    const auto run = orExit(reader.run(id));
    if (!run) continue;  // deleted between the two reads
    if (g.json) {
      array.append(runToJson(*run));
    } else {
      std::cout << run->id << '\t' << run->name.toStdString() << '\t'
                << spec::to_string(run->status) << '\n';
    }
  }
  if (g.json) printJson({{"group", group.name}, {"runs", array}});
}

void printCount(const Globals& g, backend::RunReader& reader, const std::string& name) {
  const auto group = findGroup(reader, name);
  if (g.json) {
    printJson({{"group", group.name}, {"runs", group.runs}});
  } else {
    std::cout << group.name.toStdString() << '\t' << group.runs
              << (group.runs == 1 ? " run" : " runs") << '\n';
  }
}

void editGroup(const Globals& g, const GroupArgs& a, bool add) {
  checkName(a.name);
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  QList<qint64> ids;
  for (const std::string& run : a.runs) ids.append(findRun(reader, run).id);
  const auto missing =
      a.create ? backend::RunStore::GroupMissing::create : backend::RunStore::GroupMissing::fail;
  orExit(add ? store->editGroup(QString::fromStdString(a.name), ids, {}, missing).get()
             : store->editGroup(QString::fromStdString(a.name), {}, ids).get());
  printCount(g, reader, a.name);
}

void createGroup(const Globals& g, const std::string& name) {
  checkName(name);
  auto store = openStore(g);
  orExit(store->createGroup(QString::fromStdString(name)).get());
  auto reader = orExit(store->reader());
  printCount(g, reader, name);
}

void renameGroup(const Globals& g, const GroupArgs& a) {
  checkName(a.to);
  auto store = openStore(g);
  orExit(store->renameGroup(QString::fromStdString(a.name), QString::fromStdString(a.to)).get());
  auto reader = orExit(store->reader());
  printCount(g, reader, a.to);
}

void deleteGroup(const Globals& g, const std::string& name) {
  auto store = openStore(g);
  auto reader = orExit(store->reader());
  const auto group = findGroup(reader, name);
  orExit(store->deleteGroup(group.name).get());
  if (g.json) {
    printJson({{"deleted", group.name}, {"runs_kept", group.runs}});
  } else {
    std::cout << "deleted group " << name << " (its " << group.runs
              << (group.runs == 1 ? " run stays" : " runs stay") << ")\n";
  }
}

}  // namespace

void addGroupVerb(CLI::App& app, Globals& g) {
  auto a = std::make_shared<GroupArgs>();
  CLI::App* group = app.add_subcommand(
      "group", "Groups of runs: list, show, create, add, rm, rename, delete (runs stay)");
  group->require_subcommand(1);
  group->footer("Example: shardscope-cli group add --create baseline exp-1 exp-2");
  group->add_subcommand("list", "Every group with its run count")->callback([&g] {
    listGroups(g);
  });
  CLI::App* show = group->add_subcommand("show", "The runs of a group: id, name, status");
  show->add_option("NAME", a->name, "Group name")->required();
  show->callback([&g, a] { showGroup(g, a->name); });
  CLI::App* create = group->add_subcommand("create", "Make an empty group");
  create->add_option("NAME", a->name, "Group name (letters, digits and _ - . /)")->required();
  create->callback([&g, a] { createGroup(g, a->name); });
  CLI::App* add = group->add_subcommand("add", "Add runs to a group");
  add->add_option("NAME", a->name, "Group name")->required();
  add->add_option("RUN", a->runs, "Run ids or names")->required();
  add->add_flag("--create", a->create, "Make the group when it does not exist yet");
  add->callback([&g, a] { editGroup(g, *a, true); });
  CLI::App* rm = group->add_subcommand("rm", "Take runs out of a group (the runs stay)");
  rm->add_option("NAME", a->name, "Group name")->required();
  rm->add_option("RUN", a->runs, "Run ids or names")->required();
  rm->callback([&g, a] { editGroup(g, *a, false); });
  CLI::App* rename = group->add_subcommand("rename", "Rename a group, keeping its runs");
  rename->add_option("OLD", a->name, "Group name now")->required();
  rename->add_option("NEW", a->to, "New name")->required();
  rename->callback([&g, a] { renameGroup(g, *a); });
  CLI::App* remove = group->add_subcommand("delete", "Delete a group; its runs stay");
  remove->add_option("NAME", a->name, "Group name")->required();
  remove->callback([&g, a] { deleteGroup(g, a->name); });
}

}  // namespace shardscope::cli
