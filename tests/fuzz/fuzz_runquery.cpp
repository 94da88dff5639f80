// The runs filter's query language (backend/store/runquery): any text parses or fails with a
// position inside it, never more terms than kMaxQueryTerms, and a parsed query matches a run
// without crashing, the same way twice.
#include <QString>

#include "backend/store/runquery.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const QString text =
      QString::fromUtf8(reinterpret_cast<const char*>(data), static_cast<qsizetype>(size));
  backend::RunQueryError error;
  auto query = backend::RunQuery::parse(text, &error);
  if (!query) {
    if (error.position < 0 || error.position > text.size())
      fuzz::broken("an error position outside the query");
    if (error.message.isEmpty()) fuzz::broken("an error without a message");
    return 0;
  }
  if (query->terms().size() > static_cast<std::size_t>(backend::kMaxQueryTerms))
    fuzz::broken("more terms than kMaxQueryTerms");
  backend::RunFacts run;
  run.name = "exp-1";
  run.status = "complete";
  run.tags = {"best"};
  run.params.insert("train.lr", 1e-4);
  run.params.insert("shard.strategy", "FULL_SHARD");
  run.last.insert("loss", 1.5);
  run.best.insert("loss", 1.2);
  run.words = {"lr=1e-4", "local"};
  if (query->matches(run) != query->matches(run)) fuzz::broken("a match that changes");
  return 0;
}
