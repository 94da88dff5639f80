// Tags and notes of runs and studies (schema v9): RunStore's writes, RunReader's reads, and the
// checks of runtags.h. The SQL is the same text on SQLite and PostgreSQL (both take
// `ON CONFLICT ... DO NOTHING` and `RETURNING`).
#include <QHash>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "backend/store/runreader.h"
#include "backend/store/runstore.h"
#include "backend/store/runtags.h"
#include "backend/store/storesql.h"

namespace shardscope::backend {

namespace {

using storesql::changes;
using storesql::execute;

// The link table and its owner column of each owner kind.
struct OwnerSql {
  const char* table;   // "runs" or "studies"
  const char* links;   // "run_tags" or "study_tags"
  const char* column;  // "run_id" or "study_id"
};

OwnerSql ownerSql(TagOwner owner) {
  return owner == TagOwner::run ? OwnerSql{"runs", "run_tags", "run_id"}
                                : OwnerSql{"studies", "study_tags", "study_id"};
}

bool tagChar(QChar c) {
  return c.isLetterOrNumber() || c == '_' || c == '-' || c == '.' || c == '/';
}

void markChanged(WriteContext& context, TagOwner owner) {
  if (owner == TagOwner::run) {
    context.changes().runs = true;
  } else {
    context.changes().studies = true;
  }
}

Result<void> checkOwnerExists(WriteContext& context, TagOwner owner, qint64 id) {
  const OwnerSql sql = ownerSql(owner);
  auto stmt = context.statement(std::string("SELECT 1 FROM ") + sql.table + " WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = (*stmt)->bindInt64(1, id); !r) return r;
  auto row = (*stmt)->step();
  (*stmt)->reset();
  if (!row) return row.error();
  if (!*row) {
    return fail(tagOwnerName(owner).toStdString() + " " + std::to_string(id) +
                " is not in the run log");
  }
  return ok();
}

// The id of tag `name`, created with `color` when it is new.
Result<qint64> tagId(WriteContext& context, const QString& name, const QString& color) {
  auto insert = context.statement(
      "INSERT INTO tags(name, color) VALUES (?1, ?2) ON CONFLICT(name) DO NOTHING");
  if (!insert) return insert.error();
  if (auto r = (*insert)->bindText(1, name.toStdString()); !r) return r.error();
  if (auto r = (*insert)->bindText(2, color.toStdString()); !r) return r.error();
  if (auto r = execute(**insert); !r) return r.error();
  auto select = context.statement("SELECT id FROM tags WHERE name = ?1");
  if (!select) return select.error();
  if (auto r = (*select)->bindText(1, name.toStdString()); !r) return r.error();
  auto row = (*select)->step();
  if (!row) return row.error();
  if (!*row) return fail("tag '" + name.toStdString() + "' vanished while it was added");
  const qint64 id = (*select)->columnInt64(0);
  (*select)->reset();
  return id;
}

Result<void> addTag(WriteContext& context, TagOwner owner, qint64 id, const QString& name) {
  auto tag = tagId(context, name, defaultTagColor(name));
  if (!tag) return tag.error();
  const OwnerSql sql = ownerSql(owner);
  auto link = context.statement(std::string("INSERT INTO ") + sql.links + "(" + sql.column +
                                ", tag_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING");
  if (!link) return link.error();
  if (auto r = (*link)->bindInt64(1, id); !r) return r;
  if (auto r = (*link)->bindInt64(2, *tag); !r) return r;
  return execute(**link);
}

Result<void> removeTag(WriteContext& context, TagOwner owner, qint64 id, const QString& name) {
  const OwnerSql sql = ownerSql(owner);
  auto unlink = context.statement(std::string("DELETE FROM ") + sql.links + " WHERE " + sql.column +
                                  " = ?1 AND tag_id IN (SELECT id FROM tags WHERE name = ?2)");
  if (!unlink) return unlink.error();
  if (auto r = (*unlink)->bindInt64(1, id); !r) return r;
  if (auto r = (*unlink)->bindText(2, name.toStdString()); !r) return r;
  return execute(**unlink);
}

}  // namespace

Result<void> checkLabelName(const char* what, const QString& name) {
  const std::string shown = std::string(what) + " '" + name.toStdString() + "'";
  if (name.isEmpty()) {
    return fail(std::string("a ") + what + " needs a name (letters, digits and _ - . /)");
  }
  if (name.size() > kTagNameMax) {
    return fail(shown + " is longer than " + std::to_string(kTagNameMax) +
                " characters: shorten it");
  }
  if (!name.front().isLetterOrNumber()) {
    return fail(shown + " must start with a letter or a digit");
  }
  for (const QChar c : name) {
    if (!tagChar(c)) {
      return fail(shown + " holds '" + QString(c).toStdString() + "': a " + what +
                  " has only letters, digits and _ - . /");
    }
  }
  return ok();
}

Result<void> checkTagName(const QString& name) { return checkLabelName("tag", name); }

Result<void> checkTagColor(const QString& color) {
  bool valid = color.size() == 7 && color.front() == '#';
  for (int i = 1; valid && i < color.size(); ++i) {
    const QChar c = color.at(i).toLower();
    valid = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!valid) {
    return fail("tag colour '" + color.toStdString() +
                "' is not of the form #rrggbb (e.g. #1f77b4)");
  }
  return ok();
}

QString defaultTagColor(const QString& name) {
  // Tableau's ten, which stay apart from each other on a light and a dark background.
  static constexpr std::array<const char*, 10> kPalette = {
      "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  // FNV-1a over the UTF-8 bytes: stable across processes and Qt versions (qHash is seeded).
  std::uint32_t hash = 2166136261u;
  for (const char byte : name.toUtf8()) {
    hash = (hash ^ static_cast<unsigned char>(byte)) * 16777619u;
  }
  return QString::fromLatin1(kPalette[hash % kPalette.size()]);
}

QString tagOwnerName(TagOwner owner) { return owner == TagOwner::run ? "run" : "study"; }

RunStore::Pending<void> RunStore::editTags(TagOwner owner, qint64 id, QStringList add,
                                           QStringList remove) {
  return submit<void>(1,
                      [owner, id, add = std::move(add),
                       remove = std::move(remove)](WriteContext& context) -> Result<void> {
                        for (const QStringList* names : {&add, &remove}) {
                          for (const QString& name : *names) {
                            if (auto r = checkTagName(name); !r) return r;
                          }
                        }
                        if (auto r = checkOwnerExists(context, owner, id); !r) return r;
                        for (const QString& name : remove) {
                          if (auto r = removeTag(context, owner, id, name); !r) return r;
                        }
                        for (const QString& name : add) {
                          if (auto r = addTag(context, owner, id, name); !r) return r;
                        }
                        markChanged(context, owner);
                        return ok();
                      });
}

RunStore::Pending<void> RunStore::setTagColor(const QString& name, const QString& color) {
  return submit<void>(1, [name, color](WriteContext& context) -> Result<void> {
    if (auto r = checkTagName(name); !r) return r;
    if (auto r = checkTagColor(color); !r) return r;
    auto tag = tagId(context, name, color.toLower());
    if (!tag) return tag.error();
    auto update = context.statement("UPDATE tags SET color = ?2 WHERE id = ?1");
    if (!update) return update.error();
    if (auto r = (*update)->bindInt64(1, *tag); !r) return r;
    if (auto r = (*update)->bindText(2, color.toLower().toStdString()); !r) return r;
    if (auto r = execute(**update); !r) return r;
    context.changes().runs = true;
    context.changes().studies = true;
    return ok();
  });
}

RunStore::Pending<void> RunStore::setNote(TagOwner owner, qint64 id, const QString& note) {
  return submit<void>(1, [owner, id, note](WriteContext& context) -> Result<void> {
    const std::string text = note.toStdString();
    if (text.size() > static_cast<std::size_t>(kNoteMaxBytes)) {
      return fail("the note of " + tagOwnerName(owner).toStdString() + " " + std::to_string(id) +
                  " has " + std::to_string(text.size()) + " bytes; a note holds at most " +
                  std::to_string(kNoteMaxBytes) + ": keep long text in a file and link it");
    }
    const OwnerSql sql = ownerSql(owner);
    auto update =
        context.statement(std::string("UPDATE ") + sql.table + " SET note = ?2 WHERE id = ?1");
    if (!update) return update.error();
    if (auto r = (*update)->bindInt64(1, id); !r) return r;
    if (auto r = (*update)->bindText(2, text); !r) return r;
    if (auto r = execute(**update); !r) return r;
    if (changes(context) == 0) {
      return fail(tagOwnerName(owner).toStdString() + " " + std::to_string(id) +
                  " is not in the run log");
    }
    markChanged(context, owner);
    return ok();
  });
}

Result<std::vector<TagRecord>> RunReader::knownTags() {
  auto stmt = m_db.prepare(
      "SELECT t.name, t.color, "
      "(SELECT count(*) FROM run_tags r WHERE r.tag_id = t.id), "
      "(SELECT count(*) FROM study_tags s WHERE s.tag_id = t.id) "
      "FROM tags t ORDER BY t.name");
  if (!stmt) return stmt.error();
  std::vector<TagRecord> tags;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    tags.push_back({QString::fromStdString(stmt->columnText(0)),
                    QString::fromStdString(stmt->columnText(1)), stmt->columnInt64(2),
                    stmt->columnInt64(3)});
  }
  std::sort(tags.begin(), tags.end(),
            [](const TagRecord& a, const TagRecord& b) { return a.name < b.name; });
  return tags;
}

Result<QStringList> RunReader::tags(TagOwner owner, qint64 id) {
  const OwnerSql sql = ownerSql(owner);
  auto stmt = m_db.prepare(std::string("SELECT t.name FROM ") + sql.links +
                           " l JOIN tags t ON t.id = l.tag_id WHERE l." + sql.column +
                           " = ?1 ORDER BY t.name");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, id); !r) return r.error();
  QStringList names;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    names.append(QString::fromStdString(stmt->columnText(0)));
  }
  names.sort();  // byte order on both stores (a server's collation may differ)
  return names;
}

Result<QHash<qint64, QStringList>> RunReader::allTags(TagOwner owner) {
  const OwnerSql sql = ownerSql(owner);
  auto stmt =
      m_db.prepare(std::string("SELECT l.") + sql.column + ", t.name FROM " + sql.links +
                   " l JOIN tags t ON t.id = l.tag_id ORDER BY l." + sql.column + ", t.name");
  if (!stmt) return stmt.error();
  QHash<qint64, QStringList> tags;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    tags[stmt->columnInt64(0)].append(QString::fromStdString(stmt->columnText(1)));
  }
  for (QStringList& names : tags) names.sort();
  return tags;
}

Result<QHash<qint64, QString>> RunReader::allNotes(TagOwner owner) {
  const OwnerSql sql = ownerSql(owner);
  auto stmt = m_db.prepare(std::string("SELECT id, note FROM ") + sql.table + " WHERE note != ''");
  if (!stmt) return stmt.error();
  QHash<qint64, QString> notes;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    notes.insert(stmt->columnInt64(0), QString::fromStdString(stmt->columnText(1)));
  }
  return notes;
}

Result<std::optional<QString>> RunReader::note(TagOwner owner, qint64 id) {
  const OwnerSql sql = ownerSql(owner);
  auto stmt = m_db.prepare(std::string("SELECT note FROM ") + sql.table + " WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bindInt64(1, id); !r) return r.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<QString>();
  return std::optional<QString>(QString::fromStdString(stmt->columnText(0)));
}

}  // namespace shardscope::backend
