// The data inspector: what the trainer will train on, before a run. For an experiment's
// data.train_path and data.eval_path it counts the samples, the token lengths against
// data.seq_len, the lines the trainer refuses (and why), data.pack's efficiency, the images and
// their visual tokens; and for one line it shows the rendered chat with the tokens that carry
// loss. Every number comes from the trainer's own code (SftPreparer, check_sample_length/vocab,
// parse_token_record, pack_efficiency), so they are the trainer's. Torch-free and Qt-free: the
// CLI (`shardscope-cli data inspect`) and the builder's Inspect data panel run it.
//
// A file is streamed one line at a time (scan_jsonl); what is kept is a count per distinct token
// length (the histogram), the length of each sample the trainer packs (chat data with data.pack:
// its plan needs each, 8 bytes a sample) and lists of at most InspectOptions::max_listed entries
// (their counts are whole), never the file's bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/text/sft_prepare.h"
#include "spec/experiment.h"
#include "spec/result.h"

namespace shardscope::data {

struct InspectOptions {
  std::int64_t max_listed = 200;     // entries kept per list (over seq_len, refused)
  std::int64_t largest_images = 10;  // images listed by visual tokens
  std::int64_t histogram_bins = 32;  // bins over [0, max(seq_len, longest sample)]
  /// Set from another thread to stop at the next line; the result then says `cancelled`.
  const std::atomic<bool>* cancel = nullptr;
  /// Called every few lines with the bytes read so far and the file's size.
  std::function<void(std::int64_t bytes, std::int64_t total)> progress;
};

/// A line the inspector lists: refused (with why), or longer than data.seq_len.
struct ListedLine {
  std::int64_t line = 0;  // 1-based
  /// Refused: "malformed_json", "invalid_sample", "missing_image", "unreadable_image",
  /// "vocabulary"; over seq_len: "over_seq_len".
  std::string kind;
  std::string reason;       // the trainer's message (file:line: ...)
  std::int64_t tokens = 0;  // over seq_len: the sample's tokens (images expanded)
};

/// One image after the processor's resize: its grid in patches and its tokens in the text.
struct ImageStat {
  std::int64_t line = 0;
  std::string path;
  std::int64_t grid_t = 1;
  std::int64_t grid_h = 0;
  std::int64_t grid_w = 0;
  std::int64_t tokens = 0;  // <|image_pad|> tokens: t*h*w / merge^2
};

/// Token lengths in bins of `width` tokens: counts[i] holds lengths in [i*width, (i+1)*width).
struct LengthHistogram {
  std::int64_t width = 1;
  std::vector<std::int64_t> counts;
};

/// One JSONL file as the trainer would read it.
struct FileInspection {
  std::string role;  // "train" or "eval"
  std::string path;
  std::int64_t lines = 0;        // non-blank lines
  std::int64_t samples = 0;      // lines the trainer loads (tokens format: over-long ones included)
  std::int64_t tokens = 0;       // tokens of every tokenized line (images expanded)
  std::int64_t loss_tokens = 0;  // of the loaded samples, as the trainer counts them
  std::int64_t min_tokens = 0;
  std::int64_t max_tokens = 0;
  double mean_tokens = 0;
  LengthHistogram histogram;            // every tokenized line (over seq_len included)
  std::int64_t over_seq_len = 0;        // lines longer than data.seq_len
  std::vector<ListedLine> over_listed;  // the first max_listed of them
  std::int64_t refused = 0;             // lines the trainer refuses
  std::vector<ListedLine> refused_listed;
  /// data.pack over the loaded samples with the trainer's plan (train file); absent when not
  /// packing or no sample loads. The trainer's hello.pack_efficiency, once no line is refused or
  /// over seq_len.
  std::optional<double> pack_efficiency;
  // Images of every tokenized line (over seq_len included):
  std::map<std::int64_t, std::int64_t> images_per_sample;  // images -> lines
  std::int64_t images = 0;
  std::int64_t visual_tokens = 0;         // summed over the images
  std::vector<ImageStat> largest_images;  // by tokens, largest first
  /// Chat data: what the loaded samples hold that the memory estimate's rows depend on (the
  /// trainer's hello.data_bound for the train file). Empty (no samples) for other formats.
  spec::DataBound bound;
  bool cancelled = false;
  std::int64_t bytes_read = 0;
  std::int64_t bytes_total = 0;
};

/// Both files, and what they were read with.
struct Inspection {
  std::string format;  // data.format
  std::int64_t seq_len = 0;
  bool packing = false;  // data.pack and chat data: the trainer packs
  int world = 1;         // launch.nnodes x launch.nproc_per_node
  std::string model;     // the model folder whose tokenizer and processor read the data
  std::vector<FileInspection> files;  // train, then eval when data.eval_path is set
  bool cancelled = false;
};

/// A run of tokens of one sample: text with or without loss, or one image's <|image_pad|> run.
struct SampleSegment {
  std::string text;         // the tokens decoded; an image: "<|image_pad|>"
  std::int64_t first = 0;   // index of its first token
  std::int64_t count = 0;   // tokens
  bool loss = false;        // the tokens' labels are not -100
  std::int64_t image = -1;  // the image index for an <|image_pad|> run
};

/// One line as the trainer takes it.
struct SampleView {
  std::string path;
  std::int64_t line = 0;
  std::string rendered;                 // chat: the template applied (one <|image_pad|> per image)
  std::vector<std::int64_t> input_ids;  // the trainer's (unpadded; tokens: as in the file)
  std::vector<std::int64_t> labels;     // the trainer's, -100 = no loss
  std::vector<SampleSegment> segments;  // input_ids in runs, their texts concatenated
  std::vector<ImageStat> images;
  std::int64_t seq_len = 0;
};

class DataInspector {
 public:
  /// Opens the model's tokenizer and image processor as `shardtrain train` does; an experiment
  /// the trainer could not read its data with (a tiny model with chat data, data.format = "text")
  /// is an error naming the field.
  static Result<DataInspector> open(const spec::Experiment& exp);

  /// data.train_path, then data.eval_path when set.
  Result<Inspection> inspect(const InspectOptions& options = {}) const;
  /// One file; `role` names it in the result.
  Result<FileInspection> inspect_file(const std::string& path, const std::string& role,
                                      const InspectOptions& options = {}) const;
  /// JSONL line `line` (1-based) of `path`: an error for a refused line (the trainer's reason)
  /// or one past the end.
  Result<SampleView> sample(const std::string& path, std::int64_t line) const;

  const spec::Experiment& experiment() const { return m_exp; }

 private:
  DataInspector(spec::Experiment exp, std::optional<SftPreparer> preparer, std::int64_t vocab_size);
  spec::Experiment m_exp;
  std::optional<SftPreparer> m_preparer;  // chat data; tokens data when the model has one
  std::int64_t m_vocab = 0;               // the model's vocabulary (0: unchecked)
};

/// What data.train_path's chat samples hold that the memory estimate's rows depend on, read as
/// the trainer loads them (one pass, images decoded; lines the trainer refuses are left out: it
/// would not start on them). nullopt when data.format is not "chat" (the estimate then bounds
/// rows by data.seq_len); errors are the inspector's (an unreadable file, model or tokenizer).
/// Cached per bound_key and the file's size and modification time.
/// `cancel`, set from another thread, stops the pass at its next line: an error, nothing cached.
Result<std::optional<spec::DataBound>> train_data_bound(const spec::Experiment& exp,
                                                        const std::atomic<bool>* cancel = nullptr);

/// The experiment's fields train_data_bound's answer depends on besides the file's bytes (the
/// file, the model's tokenizer and image processor, data.seq_len), one string; empty when
/// data.format is not "chat".
std::string bound_key(const spec::Experiment& exp);

/// The inspection as JSON (`data inspect --json`; docs/cli.md lists the fields).
nlohmann::json inspection_to_json(const Inspection& inspection);
/// A sample as JSON (`data inspect --line N --json`).
nlohmann::json sample_to_json(const SampleView& sample);

}  // namespace shardscope::data
