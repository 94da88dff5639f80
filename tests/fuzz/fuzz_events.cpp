// The event-line parser (spec/events): one input = one line, parsed strictly (a
// shardtrain rank) and leniently (any trial program). A line that parses must encode and parse
// back to the same line, so the reader and the writer agree on everything the reader accepts.
#include "spec/events.h"
#include "tests/fuzz/fuzz_support.h"

using namespace shardscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto line = fuzz::as_text(data, size);
  for (auto mode : {spec::ParseMode::strict, spec::ParseMode::lenient}) {
    auto event = spec::parse_event(line, mode);
    if (!event) {
      fuzz::expect_clear_error(event.message());
      continue;
    }
    const std::string encoded = spec::encode_event(*event);
    auto again = spec::parse_event(encoded, spec::ParseMode::lenient);
    if (!again) fuzz::broken("an encoded event does not parse: " + again.message());
    if (spec::encode_event(*again) != encoded)
      fuzz::broken("encode(parse(encode(e))) != encode(e): " + encoded);
  }
  return 0;
}
