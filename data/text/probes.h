// Probes: chat samples whose answers a run generates at every evaluation, one JSONL line each,
//   {"id": "cat", "messages": [{"role": "user", "content": [{"type": "image", "image": "a.png"},
//                                                          {"type": "text", "text": "What?"}]}],
//    "reference": "a cat"}
// `id` and `reference` are optional; the messages are the SFT format's (data/text/sft.h) and end
// before the answer (no assistant turn last). Torch-free: the trainer reads them and scores the
// answers with this code, and a dashboard can score the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/text/sft.h"
#include "spec/result.h"

namespace shardscope::data {

struct Probe {
  std::string id;                        // the line's `id`, else its 1-based line number
  std::optional<std::string> reference;  // the expected answer, when given
  std::string prompt;                    // the text of the last user turn (its text items)
  /// The messages followed by an empty assistant turn, so that the text before its first label
  /// is the generation prompt (the chat template's "<|im_start|>assistant\n").
  SftSample sample;
};

/// Reads every line of a probe file; a bad line stops the read with "file:line: field: fix".
/// Ids must be unique (a line number counts as the id of a line without one).
Result<std::vector<Probe>> load_probes(const std::string& path);

/// Scores of a generated answer against a reference.
struct ProbeScores {
  bool exact_match = false;  // equal once stripped of leading and trailing white space
  double f1 = 0;             // token F1 on white-space words
  double cer = 0;            // character error rate
};

/// Exact match: `text` and `reference` equal once stripped of surrounding white space.
bool text_exact_match(const std::string& text, const std::string& reference);

/// SQuAD-style token F1: words split on white space (compared as they are), the overlap counted
/// as a multiset; 1 when both have no words, 0 when only one has none.
double token_f1(const std::string& text, const std::string& reference);

/// Character error rate: the Levenshtein distance between `text` and `reference` in Unicode code
/// points (UTF-8; an invalid byte counts as one character) over the reference's code points. The
/// reference must not be empty (load_probes refuses an empty one); may exceed 1.
double char_error_rate(const std::string& text, const std::string& reference);

ProbeScores score_answer(const std::string& text, const std::string& reference);

}  // namespace shardscope::data
