// Tags and notes of runs and studies (schema v9). A tag is a short name, unique in the run log,
// with a colour; it is attached to any number of runs and studies (a sweep or an autotune). A
// note is free text (plain or Markdown) on one run or study. RunStore writes them, RunReader
// reads them; the names and colours are checked here, once, for every caller (CLI, GUI).
#pragma once

#include <QString>
#include <QStringList>

#include "spec/result.h"

namespace shardscope::backend {

/// What a tag or a note belongs to.
enum class TagOwner { run, study };

/// A tag known to the run log, with how many runs and studies carry it.
struct TagRecord {
  QString name;
  QString color;  ///< "#rrggbb"
  qint64 runs = 0;
  qint64 studies = 0;
};

/// The longest tag name, in characters.
inline constexpr int kTagNameMax = 64;
/// The longest note, in bytes of UTF-8 (a page of text, not a file store).
inline constexpr int kNoteMaxBytes = 64 * 1024;

/// Checks a tag name: 1..kTagNameMax characters, letters, digits and `_ - . /`, starting with a
/// letter or digit (so `+name`, `-name` and `tag:name` read unambiguously). The error names the
/// tag and the rule.
[[nodiscard]] Result<void> checkTagName(const QString& name);
/// Checks the name of a tag or a group (`what`, as messages say it): 1..64 characters, letters,
/// digits and `_ - . /`, starting with a letter or digit. checkTagName and checkGroupName.
[[nodiscard]] Result<void> checkLabelName(const char* what, const QString& name);
/// Checks a colour: "#rrggbb" (hex digits, either case).
[[nodiscard]] Result<void> checkTagColor(const QString& color);
/// The colour a new tag gets: one of a fixed palette of readable colours, picked by the name's
/// hash, so the same name gets the same colour in every run log.
QString defaultTagColor(const QString& name);

/// "run" or "study", as messages say it.
QString tagOwnerName(TagOwner owner);

}  // namespace shardscope::backend
