// eval.probes in a run: the probe file read and prepared with the trainer's own chat reader,
// template, tokenizer and image processor before step 1 (a bad line is a config error naming
// it), the probes' images copied once into the run directory under their content's SHA-256, and
// the `sample` event of each generated answer with its scores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/text/probes.h"
#include "data/text/sft_prepare.h"
#include "spec/events.h"

namespace shardscope::trainer {

struct ProbeSet {
  std::vector<data::Probe> probes;
  std::vector<data::PreparedSample> prepared;    // probes[i] tokenized, its images preprocessed
  std::vector<std::vector<std::string>> images;  // probes[i]'s copies, relative to the run dir

  bool empty() const { return probes.empty(); }
  std::int64_t size() const { return static_cast<std::int64_t>(probes.size()); }
};

/// Reads and prepares every probe of `path` (ids below `vocab_size`); fails (config) naming the
/// file and line of a bad one. With `copy_to` set (rank 0), each distinct image is copied to
/// copy_to/probes/<sha256 of its bytes><extension> unless already there.
ProbeSet load_probe_set(const std::string& path, const data::SftPreparer& preparer,
                        std::int64_t vocab_size, const std::string& copy_to);

/// The `sample` event of probe `i`'s answer `text` (`tokens` generated) at `step`.
spec::SampleEvent sample_event(const ProbeSet& set, std::size_t i, std::int64_t step,
                               const std::string& text, std::int64_t tokens);

}  // namespace shardscope::trainer
