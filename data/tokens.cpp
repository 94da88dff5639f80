#include "data/tokens.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "data/jsonl.h"

namespace shardscope::data {
namespace {

Result<std::vector<std::int64_t>> read_ids(const nlohmann::json& record, const char* field,
                                           std::int64_t vocab, bool allow_ignore) {
  const auto& v = record.at(field);
  if (!v.is_array()) return fail(std::string(field) + ": expected an array of token ids");
  std::vector<std::int64_t> ids;
  ids.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer())
      return fail(std::string(field) + "[" + std::to_string(i) + "]: expected an integer");
    const auto id = v[i].get<std::int64_t>();
    const bool ok = (id >= 0 && id < vocab) || (allow_ignore && id == -100);
    if (!ok) {
      return fail(std::string(field) + "[" + std::to_string(i) + "]: " + std::to_string(id) +
                  " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")" +
                  (allow_ignore ? " and is not -100" : "") +
                  "; check the tokenizer matches model vocab_size");
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

Result<TokenSample> parse_token_record(const nlohmann::json& rec, std::int64_t vocab_size) {
  if (!rec.contains("input_ids"))
    return fail("input_ids: missing (data.format = \"tokens\" needs {\"input_ids\": [...]})");
  auto ids = read_ids(rec, "input_ids", vocab_size, false);
  if (!ids) return ids.error();
  TokenSample s;
  s.input_ids = std::move(*ids);
  if (rec.contains("labels")) {
    auto labels = read_ids(rec, "labels", vocab_size, true);
    if (!labels) return labels.error();
    if (labels->size() != s.input_ids.size()) {
      return fail("labels: " + std::to_string(labels->size()) + " labels for " +
                  std::to_string(s.input_ids.size()) + " input_ids; give one label per token");
    }
    s.labels = std::move(*labels);
  } else {
    s.labels = s.input_ids;
  }
  return s;
}

Result<std::vector<TokenSample>> load_token_samples(const std::string& path, std::int64_t seq_len,
                                                    std::int64_t vocab_size) {
  std::vector<TokenSample> samples;
  auto read =
      read_jsonl(path, [&](const nlohmann::json& rec, const JsonlPosition&) -> Result<void> {
        auto s = parse_token_record(rec, vocab_size);
        if (!s) return s.error();
        const auto T = static_cast<std::size_t>(seq_len);
        s->input_ids.resize(T, 0);
        s->labels.resize(T, -100);
        samples.push_back(std::move(*s));
        return {};
      });
  if (!read) return read.error();
  if (samples.empty()) return fail(path + ": no samples; data.train_path needs at least one line");
  return samples;
}

std::int64_t loss_tokens(const TokenSample& sample) {
  std::int64_t n = 0;
  for (std::size_t t = 1; t < sample.labels.size(); ++t) n += sample.labels[t] != -100 ? 1 : 0;
  return n;
}

SampleOrder::SampleOrder(std::int64_t samples, std::uint64_t seed, bool shuffle)
    : m_samples(samples), m_seed(seed), m_shuffle(shuffle) {}

std::int64_t SampleOrder::at(std::int64_t offset) {
  const std::int64_t epoch = offset / m_samples;
  if (!m_shuffle) return offset % m_samples;
  if (epoch != m_epoch) {
    m_perm.resize(static_cast<std::size_t>(m_samples));
    std::iota(m_perm.begin(), m_perm.end(), 0);
    std::mt19937_64 rng(m_seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(epoch));
    // Fisher-Yates with our own index draw: std::shuffle's draws are implementation-defined.
    for (std::size_t i = m_perm.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng() % i);
      std::swap(m_perm[i - 1], m_perm[j]);
    }
    m_epoch = epoch;
  }
  return m_perm[static_cast<std::size_t>(offset % m_samples)];
}

Result<void> write_demo_tokens(const std::string& path, std::int64_t count, std::int64_t seq_len,
                               std::int64_t vocab, std::uint64_t seed) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp);
  if (!out) return fail(path + ": cannot write; choose a writable folder");
  std::mt19937_64 rng(seed);
  const std::int64_t strides[] = {1, 2, 3, 5, 7};
  for (std::int64_t i = 0; i < count; ++i) {
    const auto start = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(vocab));
    const auto stride = strides[rng() % 5];
    nlohmann::json ids = nlohmann::json::array();
    for (std::int64_t t = 0; t < seq_len; ++t) ids.push_back((start + stride * t) % vocab);
    out << nlohmann::json{{"input_ids", ids}}.dump() << '\n';
  }
  out.close();
  if (!out) return fail(path + ": write failed (disk full?)");
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(path + ": cannot rename into place: " + ec.message());
  return {};
}

}  // namespace shardscope::data
