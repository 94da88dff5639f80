// Groups of runs (schema v12): RunStore's writes, RunReader's reads, and the check of
// rungroups.h. The SQL is the same text on SQLite and PostgreSQL (both take
// `ON CONFLICT ... DO NOTHING`).
#include <QHash>

#include <algorithm>
#include <string>

#include "backend/store/rungroups.h"
#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/store/runtags.h"
#include "backend/store/storesql.h"

namespace shardscope::backend {

namespace {

using storesql::execute;

std::string quoted(const QString& name) { return "group '" + name.toStdString() + "'"; }

// The id of group `name`, or nullopt when there is none.
Result<std::optional<qint64>> findGroup(WriteContext& context, const QString& name) {
  auto stmt = context.statement("SELECT id FROM run_groups WHERE name = ?1");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindText(1, name.toStdString()); !r) return r.error();
  auto row = (*stmt)->step();
  if (!row) {
    (*stmt)->reset();
    return row.error();
  }
  std::optional<qint64> id;
  if (*row) id = (*stmt)->columnInt64(0);
  (*stmt)->reset();
  return id;
}

Result<qint64> insertGroup(WriteContext& context, const QString& name, double now) {
  auto insert =
      context.statement("INSERT INTO run_groups(name, created_at) VALUES (?1, ?2) RETURNING id");
  if (!insert) return insert.error();
  if (auto r = (*insert)->bindText(1, name.toStdString()); !r) return r.error();
  if (auto r = (*insert)->bindDouble(2, now); !r) return r.error();
  return storesql::insertedId(**insert);
}

// The id of group `name`; fails naming the fix when there is none.
Result<qint64> existingGroup(WriteContext& context, const QString& name) {
  auto id = findGroup(context, name);
  if (!id) return id.error();
  if (!*id) {
    return fail("no " + quoted(name) + " in the run log (shardscope-cli group list shows them; " +
                "group create " + name.toStdString() + " makes it)");
  }
  return **id;
}

Result<void> checkRunsExist(WriteContext& context, const QList<qint64>& runIds) {
  auto stmt = context.statement("SELECT 1 FROM runs WHERE id = ?1");
  if (!stmt) return stmt.error();
  for (const qint64 id : runIds) {
    if (auto r = (*stmt)->bindInt64(1, id); !r) return r;
    auto row = (*stmt)->step();
    (*stmt)->reset();
    if (!row) return row.error();
    if (!*row) return fail("run " + std::to_string(id) + " is not in the run log");
  }
  return ok();
}

Result<void> linkRuns(WriteContext& context, qint64 groupId, const QList<qint64>& runIds,
                      bool add) {
  auto stmt = context.statement(
      add ? "INSERT INTO run_group_members(group_id, run_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING"
          : "DELETE FROM run_group_members WHERE group_id = ?1 AND run_id = ?2");
  if (!stmt) return stmt.error();
  for (const qint64 id : runIds) {
    if (auto r = (*stmt)->bindInt64(1, groupId); !r) return r;
    if (auto r = (*stmt)->bindInt64(2, id); !r) return r;
    auto done = execute(**stmt);
    (*stmt)->reset();
    if (!done) return done;
  }
  return ok();
}

GroupRecord groupFromRow(const Statement& stmt) {
  return {stmt.columnInt64(0), QString::fromStdString(stmt.columnText(1)), stmt.columnDouble(2),
          stmt.columnInt64(3)};
}

constexpr const char* kGroupColumns =
    "SELECT g.id, g.name, g.created_at, "
    "(SELECT count(*) FROM run_group_members m WHERE m.group_id = g.id) FROM run_groups g";

}  // namespace

Result<void> checkGroupName(const QString& name) { return checkLabelName("group", name); }

RunStore::Pending<qint64> RunStore::createGroup(const QString& name) {
  const double now = clock().wallNow();
  return submit<qint64>(1, [name, now](WriteContext& context) -> Result<qint64> {
    if (auto r = checkGroupName(name); !r) return r.error();
    auto found = findGroup(context, name);
    if (!found) return found.error();
    if (*found) return fail(quoted(name) + " already exists: choose another name");
    auto id = insertGroup(context, name, now);
    if (!id) return id.error();
    context.changes().runs = true;
    return *id;
  });
}

RunStore::Pending<void> RunStore::renameGroup(const QString& from, const QString& to) {
  return submit<void>(1, [from, to](WriteContext& context) -> Result<void> {
    if (auto r = checkGroupName(to); !r) return r;
    auto id = existingGroup(context, from);
    if (!id) return id.error();
    if (from == to) return ok();
    auto clash = findGroup(context, to);
    if (!clash) return clash.error();
    if (*clash)
      return fail(quoted(to) + " already exists: delete it first, or choose another name");
    auto update = context.statement("UPDATE run_groups SET name = ?2 WHERE id = ?1");
    if (!update) return update.error();
    if (auto r = (*update)->bindInt64(1, *id); !r) return r;
    if (auto r = (*update)->bindText(2, to.toStdString()); !r) return r;
    if (auto r = execute(**update); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::deleteGroup(const QString& name) {
  return submit<void>(1, [name](WriteContext& context) -> Result<void> {
    auto id = existingGroup(context, name);
    if (!id) return id.error();
    // The members go with the group (ON DELETE CASCADE); the runs stay.
    auto remove = context.statement("DELETE FROM run_groups WHERE id = ?1");
    if (!remove) return remove.error();
    if (auto r = (*remove)->bindInt64(1, *id); !r) return r;
    if (auto r = execute(**remove); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::editGroup(const QString& name, QList<qint64> add,
                                            QList<qint64> remove, GroupMissing missing) {
  const double now = clock().wallNow();
  const auto rows = static_cast<std::size_t>(std::max<qsizetype>(1, add.size() + remove.size()));
  return submit<void>(rows,
                      [name, add = std::move(add), remove = std::move(remove), missing,
                       now](WriteContext& context) -> Result<void> {
                        if (auto r = checkGroupName(name); !r) return r;
                        if (auto r = checkRunsExist(context, add); !r) return r;
                        auto found = findGroup(context, name);
                        if (!found) return found.error();
                        qint64 id = 0;
                        if (*found) {
                          id = **found;
                        } else if (missing == GroupMissing::create) {
                          auto made = insertGroup(context, name, now);
                          if (!made) return made.error();
                          id = *made;
                        } else {
                          return existingGroup(context, name).error();
                        }
                        if (auto r = linkRuns(context, id, remove, false); !r) return r;
                        if (auto r = linkRuns(context, id, add, true); !r) return r;
                        context.changes().runs = true;
                        return ok();
                      });
}

Result<std::vector<GroupRecord>> RunReader::groups() {
  auto stmt = m_db.prepare(std::string(kGroupColumns) + " ORDER BY g.name");
  if (!stmt) return stmt.error();
  std::vector<GroupRecord> groups;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    groups.push_back(groupFromRow(*stmt));
  }
  // Byte order on both stores (a server's collation may differ).
  std::sort(groups.begin(), groups.end(),
            [](const GroupRecord& a, const GroupRecord& b) { return a.name < b.name; });
  return groups;
}

Result<std::optional<GroupRecord>> RunReader::group(const QString& name) {
  auto stmt = m_db.prepare(std::string(kGroupColumns) + " WHERE g.name = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindText(1, name.toStdString()); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<GroupRecord>();
  return std::optional<GroupRecord>(groupFromRow(*stmt));
}

Result<std::vector<qint64>> RunReader::groupRuns(qint64 groupId) {
  auto stmt =
      m_db.prepare("SELECT run_id FROM run_group_members WHERE group_id = ?1 ORDER BY run_id");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, groupId); !r) return r.error();
  std::vector<qint64> ids;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    ids.push_back(stmt->columnInt64(0));
  }
  return ids;
}

Result<QHash<qint64, QStringList>> RunReader::allGroups() {
  auto stmt = m_db.prepare(
      "SELECT m.run_id, g.name FROM run_group_members m JOIN run_groups g ON g.id = m.group_id");
  if (!stmt) return stmt.error();
  QHash<qint64, QStringList> groups;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    groups[stmt->columnInt64(0)].append(QString::fromStdString(stmt->columnText(1)));
  }
  for (QStringList& names : groups) names.sort();
  return groups;
}

}  // namespace shardscope::backend
