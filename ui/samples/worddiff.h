// Word-level differences between two answers, for the Samples view's highlights: the words of a
// text outside a longest common subsequence (LCS) of its words and another text's. Words are
// runs of non-space characters, compared exactly. Pure functions over QString, no widgets.
#pragma once

#include <QString>
#include <QVector>

namespace shardscope::ui::samples {

/// A word of a text: where it starts and how many characters (UTF-16 units) it has.
struct WordSpan {
  int start = 0;
  int length = 0;
  bool operator==(const WordSpan&) const = default;
};

/// The words of `text` in order (maximal runs of non-space characters).
QVector<WordSpan> splitWords(const QString& text);

/// The words of `after` that are not part of a longest common subsequence of the words of
/// `before` and `after`: what changed from `before` (inserted or replaced words), as spans of
/// `after`. Above kMaxLcsCells word pairs, a word counts as kept when `before` has it anywhere
/// (as often), so a pathological answer costs linear time, not quadratic memory.
QVector<WordSpan> changedWords(const QString& before, const QString& after);

/// Word pairs up to which changedWords computes the exact LCS (about 4 MB of table).
constexpr qsizetype kMaxLcsCells = qsizetype(1) << 20;

}  // namespace shardscope::ui::samples
