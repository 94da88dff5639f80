#include "ui/samples/worddiff.h"

#include <QHash>
#include <QStringView>

#include <vector>

namespace shardscope::ui::samples {

QVector<WordSpan> splitWords(const QString& text) {
  QVector<WordSpan> words;
  int i = 0;
  const int n = int(text.size());
  while (i < n) {
    while (i < n && text.at(i).isSpace()) ++i;
    const int start = i;
    while (i < n && !text.at(i).isSpace()) ++i;
    if (i > start) words.append({start, i - start});
  }
  return words;
}

namespace {

QStringView wordOf(const QString& text, const WordSpan& w) {
  return QStringView(text).mid(w.start, w.length);
}

// Linear fallback: a word is kept while `before` still has an unused copy of it.
QVector<WordSpan> changedByCount(const QString& before, const QVector<WordSpan>& a,
                                 const QString& after, const QVector<WordSpan>& b) {
  QHash<QString, int> left;
  for (const auto& w : a) ++left[wordOf(before, w).toString()];
  QVector<WordSpan> out;
  for (const auto& w : b) {
    int& count = left[wordOf(after, w).toString()];
    if (count > 0)
      --count;
    else
      out.append(w);
  }
  return out;
}

}  // namespace

QVector<WordSpan> changedWords(const QString& before, const QString& after) {
  const QVector<WordSpan> a = splitWords(before);
  QVector<WordSpan> b = splitWords(after);  // not const: moved out when `before` is empty
  const qsizetype n = a.size();
  const qsizetype m = b.size();
  if (n == 0) return b;
  if ((n + 1) * (m + 1) > kMaxLcsCells) return changedByCount(before, a, after, b);
  // lcs[i][j]: the LCS length of a[i..] and b[j..], one row of m + 1 per i.
  std::vector<int> lcs(size_t((n + 1) * (m + 1)), 0);
  const auto at = [&](qsizetype i, qsizetype j) -> int& { return lcs[size_t(i * (m + 1) + j)]; };
  for (qsizetype i = n - 1; i >= 0; --i) {
    for (qsizetype j = m - 1; j >= 0; --j) {
      at(i, j) = wordOf(before, a[i]) == wordOf(after, b[j]) ? at(i + 1, j + 1) + 1
                                                             : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  // Walk one LCS from the start; the words of `after` it skips are the changed ones.
  QVector<WordSpan> out;
  qsizetype i = 0;
  qsizetype j = 0;
  while (j < m) {
    if (i < n && wordOf(before, a[i]) == wordOf(after, b[j])) {
      ++i;
      ++j;
    } else if (i < n && at(i + 1, j) >= at(i, j + 1)) {
      ++i;
    } else {
      out.append(b[j]);
      ++j;
    }
  }
  return out;
}

}  // namespace shardscope::ui::samples
