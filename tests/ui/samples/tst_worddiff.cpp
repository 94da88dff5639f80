// The Samples view's word diff (ui/samples/worddiff.h): which words of an answer changed from the
// answer to its left, on hand-made cases (an insertion, a replacement, a reordering, repeated
// words, white space) and, on random word sequences, against a longest common subsequence counted
// here by a separate recursion: the words kept are a subsequence of the old answer, and as many as
// an LCS has.
#include <QRandomGenerator>
#include <QTest>

#include <functional>
#include <map>

#include "ui/samples/worddiff.h"

using namespace shardscope::ui::samples;

namespace {

QStringList changed(const QString& before, const QString& after) {
  QStringList out;
  for (const auto& w : changedWords(before, after)) out << after.mid(w.start, w.length);
  return out;
}

// LCS length of two word lists by memoised recursion (not the table the product fills).
int lcsLength(const QStringList& a, const QStringList& b) {
  std::map<std::pair<int, int>, int> memo;
  std::function<int(int, int)> go = [&](int i, int j) -> int {
    if (i == a.size() || j == b.size()) return 0;
    if (const auto it = memo.find({i, j}); it != memo.end()) return it->second;
    const int best = a[i] == b[j] ? go(i + 1, j + 1) + 1 : std::max(go(i + 1, j), go(i, j + 1));
    memo[{i, j}] = best;
    return best;
  };
  return go(0, 0);
}

}  // namespace

class TestWordDiff : public QObject {
  Q_OBJECT

 private slots:
  void splitsOnWhiteSpaceWithPositions() {
    const QString text = QStringLiteral("  ünï\tcödé\n\nx ");
    const auto words = splitWords(text);
    QCOMPARE(words.size(), 3);
    QCOMPARE(words[0], (WordSpan{2, 3}));
    QCOMPARE(words[1], (WordSpan{6, 4}));
    QCOMPARE(words[2], (WordSpan{12, 1}));
    QVERIFY(splitWords(QStringLiteral(" \n ")).isEmpty());
  }

  void handMadeCases() {
    QCOMPARE(changed("a black cat", "a black cat"), QStringList());
    QCOMPARE(changed("a black cat", "a cat"), QStringList());  // a deletion marks nothing
    QCOMPARE(changed("a cat", "a black cat"), QStringList{"black"});
    QCOMPARE(changed("the red car", "the blue car"), QStringList{"blue"});
    QCOMPARE(changed("a b c", "c a b"), QStringList{"c"});
    QCOMPARE(changed("the the cat", "the cat the").size(), 1);
    QCOMPARE(changed("hi\nthere", "hi   there"), QStringList());  // white space is no word
    QCOMPARE(changed("Cat", "cat"), QStringList{"cat"});          // compared exactly
    QCOMPARE(changed("", "two words"), (QStringList{"two", "words"}));
    QCOMPARE(changed("two words", ""), QStringList());
    const QString after = QStringLiteral("x  blue y");
    const auto spans = changedWords("x red y", after);
    QCOMPARE(spans.size(), 1);
    QCOMPARE(spans[0], (WordSpan{3, 4}));
  }

  void keepsAsManyWordsAsALongestCommonSubsequence() {
    QRandomGenerator rng(7);
    const QStringList vocabulary{"a", "b", "c", "d", "e"};
    for (int round = 0; round < 300; ++round) {
      QStringList a;
      QStringList b;
      for (int i = int(rng.bounded(12)); i > 0; --i) a << vocabulary[int(rng.bounded(5))];
      for (int i = int(rng.bounded(12)); i > 0; --i) b << vocabulary[int(rng.bounded(5))];
      const QString before = a.join(' ');
      const QString after = b.join(' ');
      const auto spans = changedWords(before, after);
      // The words not marked, in order, must be a subsequence of `before`'s words.
      QStringList kept;
      const auto words = splitWords(after);
      for (const auto& w : words)
        if (!spans.contains(w)) kept << after.mid(w.start, w.length);
      int i = 0;
      for (const QString& w : a)
        if (i < kept.size() && kept[i] == w) ++i;
      QVERIFY2(i == kept.size(), qPrintable(before + " | " + after));
      QCOMPARE(kept.size(), lcsLength(a, b));
    }
  }

  // Past kMaxLcsCells the count fallback still finds one inserted word in a long answer.
  void longAnswersStayLinear() {
    QStringList words;
    for (int i = 0; i < 1200; ++i) words << QStringLiteral("w%1").arg(i);
    const QString before = words.join(' ');
    QVERIFY(qsizetype(1201) * 1202 > kMaxLcsCells);
    words.insert(600, QStringLiteral("new"));
    QCOMPARE(changed(before, words.join(' ')), QStringList{"new"});
  }
};

QTEST_GUILESS_MAIN(TestWordDiff)
#include "tst_worddiff.moc"
