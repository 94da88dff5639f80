// JSONL samples (data/jsonl, text/sft): the input is a train.jsonl file. It must load or
// be refused with a message naming the file; a loaded file has one sample per non-blank line.
#include <nlohmann/json.hpp>

#include "data/jsonl.h"
#include "data/text/sft.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::as_file(data, size, "fuzz-train.jsonl");
  std::int64_t visited = 0;
  auto lines =
      data::read_jsonl(path, [&](const nlohmann::json& record, const data::JsonlPosition& at) {
        if (!record.is_object())
          fuzz::broken("read_jsonl passed on a record that is not an object");
        if (at.line < 1 || at.byte_offset < 0 || at.byte_offset >= std::int64_t(size))
          fuzz::broken("a record position outside the file");
        ++visited;
        return Result<void>{};
      });
  if (!lines) {
    fuzz::expect_clear_error(lines.message(), path);
  } else if (*lines != visited) {
    fuzz::broken("read_jsonl counted a different number of records than it visited");
  }
  auto samples = data::load_sft_jsonl(path);
  if (!samples) {
    fuzz::expect_clear_error(samples.message(), path);
    return 0;
  }
  for (const auto& s : *samples)
    if (s.where.path != path || s.where.line < 1) fuzz::broken("a sample without its line");
  return 0;
}
