// Human verdicts on probe answers (schema v11): RunStore's write, RunReader's reads, and the
// names of verdicts.h. The SQL is the same text on SQLite and PostgreSQL (both take
// `ON CONFLICT ... DO UPDATE` with `excluded`).
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>

#include <cmath>
#include <string>

#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/store/storesql.h"
#include "backend/store/verdicts.h"
#include "spec/search_names.h"

namespace shardscope::backend {

namespace {

using storesql::execute;

Result<void> checkRunExists(WriteContext& context, qint64 runId) {
  auto stmt = context.statement("SELECT 1 FROM runs WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
  auto row = (*stmt)->step();
  (*stmt)->reset();
  if (!row) return row.error();
  if (!*row) return fail("run " + std::to_string(runId) + " is not in the run log");
  return ok();
}

Verdict verdictOf(const std::string& text) { return text == "bad" ? Verdict::bad : Verdict::good; }

Result<VerdictCounts> countsOf(WriteContext& context, qint64 runId) {
  auto stmt = context.statement(
      "SELECT verdict, count(*) FROM verdicts WHERE run_id = ?1 GROUP BY verdict");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, runId); !r) return r.error();
  VerdictCounts counts;
  for (;;) {
    auto row = (*stmt)->step();
    if (!row) {
      (*stmt)->reset();
      return row.error();
    }
    if (!*row) break;
    (verdictOf((*stmt)->columnText(0)) == Verdict::good ? counts.good : counts.bad) =
        (*stmt)->columnInt64(1);
  }
  (*stmt)->reset();
  return counts;
}

// A complete trial of a study whose objectives include probes.good_rate: its value there is its
// good rate as the verdicts stand now (null while nothing is marked), so the study's samplers,
// `study show` and the dashboard read the judgement as it grows. Other runs are left alone.
Result<void> retellGoodRate(WriteContext& context, qint64 runId) {
  auto stmt = context.statement(
      "SELECT s.objectives, r.objective_values FROM runs r JOIN studies s ON s.id = r.study_id "
      "WHERE r.id = ?1 AND r.status = 'complete'");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, runId); !r) return r;
  auto row = (*stmt)->step();
  if (!row) {
    (*stmt)->reset();
    return row.error();
  }
  if (!*row) {
    (*stmt)->reset();
    return ok();
  }
  const QJsonArray names =
      QJsonDocument::fromJson(QByteArray::fromStdString((*stmt)->columnText(0))).array();
  QJsonArray values =
      QJsonDocument::fromJson(QByteArray::fromStdString((*stmt)->columnText(1))).array();
  (*stmt)->reset();
  const auto at = names.toVariantList().indexOf(QString::fromLatin1(
      spec::kGoodRateObjective.data(), qsizetype(spec::kGoodRateObjective.size())));
  if (at < 0) return ok();
  auto counts = countsOf(context, runId);
  if (!counts) return counts.error();
  while (values.size() < names.size()) values.append(QJsonValue());
  const auto rate = counts->goodRate();
  values[at] = rate ? QJsonValue(*rate) : QJsonValue();
  auto update =
      context.statement("UPDATE runs SET objective_values = ?2, objective = ?3 WHERE id = ?1");
  if (!update) return update.error();
  if (auto r = (*update)->bindInt64(1, runId); !r) return r;
  if (auto r = (*update)->bindText(
          2, QJsonDocument(values).toJson(QJsonDocument::Compact).toStdString());
      !r)
    return r;
  const QJsonValue first = values.first();
  if (auto r =
          first.isDouble() ? (*update)->bindDouble(3, first.toDouble()) : (*update)->bindNull(3);
      !r)
    return r;
  if (auto r = execute(**update); !r) return r;
  context.changes().studies = true;
  return ok();
}

}  // namespace

const char* verdictName(Verdict verdict) { return verdict == Verdict::good ? "good" : "bad"; }

Result<std::optional<Verdict>> parseVerdict(const QString& word) {
  if (word == QLatin1String("good")) return std::optional<Verdict>(Verdict::good);
  if (word == QLatin1String("bad")) return std::optional<Verdict>(Verdict::bad);
  if (word == QLatin1String("clear")) return std::optional<Verdict>();
  return fail("verdict '" + word.toStdString() + "' is not one of good, bad, clear");
}

QString verdictAuthor() {
  for (const char* name : {"USER", "USERNAME"}) {
    QString who = qEnvironmentVariable(name);
    if (!who.isEmpty()) return who;
  }
  return QStringLiteral("unknown");
}

RunStore::Pending<void> RunStore::setVerdict(qint64 runId, const QString& probe, qint64 step,
                                             std::optional<Verdict> verdict, const QString& who) {
  const double now = clock().wallNow();
  return submit<void>(1, [=](WriteContext& context) -> Result<void> {
    if (probe.isEmpty()) return fail("a verdict needs the probe's id (its samples' probe)");
    if (step < 0)
      return fail("a verdict's step must be 0 or more (got " + std::to_string(step) + ")");
    if (auto r = checkRunExists(context, runId); !r) return r;
    if (!verdict) {
      auto clear =
          context.statement("DELETE FROM verdicts WHERE run_id = ?1 AND probe = ?2 AND step = ?3");
      if (!clear) return clear.error();
      if (auto r = (*clear)->bindInt64(1, runId); !r) return r;
      if (auto r = (*clear)->bindText(2, probe.toStdString()); !r) return r;
      if (auto r = (*clear)->bindInt64(3, step); !r) return r;
      if (auto r = execute(**clear); !r) return r;
    } else {
      auto upsert = context.statement(
          "INSERT INTO verdicts(run_id, probe, step, verdict, who, marked_at) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(run_id, probe, step) DO UPDATE SET "
          "verdict = excluded.verdict, who = excluded.who, marked_at = excluded.marked_at");
      if (!upsert) return upsert.error();
      if (auto r = (*upsert)->bindInt64(1, runId); !r) return r;
      if (auto r = (*upsert)->bindText(2, probe.toStdString()); !r) return r;
      if (auto r = (*upsert)->bindInt64(3, step); !r) return r;
      if (auto r = (*upsert)->bindText(4, verdictName(*verdict)); !r) return r;
      if (auto r = (*upsert)->bindText(5, who.toStdString()); !r) return r;
      if (auto r = (*upsert)->bindDouble(6, now); !r) return r;
      if (auto r = execute(**upsert); !r) return r;
    }
    if (auto r = retellGoodRate(context, runId); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::refreshGoodRate(qint64 runId) {
  return submit<void>(1, [runId](WriteContext& context) -> Result<void> {
    if (auto r = retellGoodRate(context, runId); !r) return r;
    context.changes().runs = true;
    return ok();
  });
}

Result<std::vector<VerdictRecord>> RunReader::verdicts(qint64 runId) {
  auto stmt = m_db.prepare(
      "SELECT probe, step, verdict, who, marked_at FROM verdicts WHERE run_id = ?1 "
      "ORDER BY step, probe");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  std::vector<VerdictRecord> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back({runId, QString::fromStdString(stmt->columnText(0)), stmt->columnInt64(1),
                   verdictOf(stmt->columnText(2)), QString::fromStdString(stmt->columnText(3)),
                   stmt->columnDouble(4)});
  }
  return out;
}

Result<QHash<qint64, VerdictCounts>> RunReader::verdictCounts() {
  auto stmt =
      m_db.prepare("SELECT run_id, verdict, count(*) FROM verdicts GROUP BY run_id, verdict");
  if (!stmt) return stmt.error();
  QHash<qint64, VerdictCounts> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    VerdictCounts& counts = out[stmt->columnInt64(0)];
    (verdictOf(stmt->columnText(1)) == Verdict::good ? counts.good : counts.bad) =
        stmt->columnInt64(2);
  }
  return out;
}

Result<VerdictCounts> RunReader::verdictCounts(qint64 runId) {
  auto stmt =
      m_db.prepare("SELECT verdict, count(*) FROM verdicts WHERE run_id = ?1 GROUP BY verdict");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, runId); !r) return r.error();
  VerdictCounts counts;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    (verdictOf(stmt->columnText(0)) == Verdict::good ? counts.good : counts.bad) =
        stmt->columnInt64(1);
  }
  return counts;
}

}  // namespace shardscope::backend
