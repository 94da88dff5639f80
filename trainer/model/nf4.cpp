// NF4 as bitsandbytes 0.50 computes it on the CPU. The 4-bit step follows bitsandbytes' torch
// implementation (backends/default/ops.py quantize_4bit), so it is written with the same ATen ops
// in the same order: the reciprocal of the absmax times the block for whole blocks, a division
// for the tail block, and torch.bucketize over the midpoints of the levels. The 8-bit step of the
// double quantization follows its native CPU kernel (quantize_blockwise on "cpu"), which does not
// search the dynamic map: it rounds each scaled value onto a grid of 65536 points over [-1, 1]
// and reads the code from a table built once per map, so a value near a midpoint can take the
// farther code. That is reproduced here in scalar float arithmetic, step for step.

#include "trainer/model/nf4.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "spec/model_shape.h"
#include "trainer/base/fatal.h"

namespace shardscope::model {
namespace {

using spec::ErrorKind;

// The 16 levels as bitsandbytes lists them (normal quantiles with an exact zero), as float.
constexpr std::array<double, 16> kNf4Levels = {-1.0,
                                               -0.6961928009986877,
                                               -0.5250730514526367,
                                               -0.39491748809814453,
                                               -0.28444138169288635,
                                               -0.18477343022823334,
                                               -0.09105003625154495,
                                               0.0,
                                               0.07958029955625534,
                                               0.16093020141124725,
                                               0.24611230194568634,
                                               0.33791524171829224,
                                               0.44070982933044434,
                                               0.5626170039176941,
                                               0.7229568362236023,
                                               1.0};

constexpr int kGrid = 65536;  // points of the 8-bit quantizer's grid over [-1, 1]

// The grid point -> code table of the native 8-bit quantizer for `map` (256 ascending values):
// point i stands for -1 + 2 i / 65535 and takes the first code whose midpoint with the next one is
// not below it.
std::vector<std::uint8_t> grid_table(const std::vector<float>& map) {
  std::vector<float> mid(map.size() - 1);
  for (std::size_t i = 0; i + 1 < map.size(); ++i) mid[i] = 0.5f * (map[i] + map[i + 1]);
  std::vector<std::uint8_t> table(kGrid);
  std::size_t code = 0;
  for (int i = 0; i < kGrid; ++i) {
    const float point = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kGrid - 1);
    while (code < mid.size() && mid[code] < point) ++code;
    table[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(code);
  }
  return table;
}

std::vector<float> dynamic_map_values() {
  // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for exponent i, 2^i
  // evenly spaced fractions in (0.1, 1] (midpoints of a float32 linspace) times 10^(i - 6), both
  // signs; then 0 and 1, sorted. The ATen ops are the ones torch runs for bitsandbytes' Python.
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const at::Tensor bounds = at::linspace(0.1, 1.0, (std::int64_t{1} << i) + 1, at::kFloat);
    const at::Tensor means = (bounds.slice(0, 0, -1) + bounds.slice(0, 1)) / 2.0;
    const double scale = std::pow(10.0, i - 6);
    for (const double sign : {1.0, -1.0}) {
      const at::Tensor v = (sign * scale) * means;
      const float* p = v.data_ptr<float>();
      data.insert(data.end(), p, p + v.numel());
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  return data;
}

const std::vector<float>& dynamic_map() {
  static const std::vector<float> map = dynamic_map_values();
  return map;
}

const std::vector<std::uint8_t>& dynamic_table() {
  static const std::vector<std::uint8_t> table = grid_table(dynamic_map());
  return table;
}

// bitsandbytes' quantize_blockwise(x, code=dynamic map, blocksize=256) on the CPU: (codes (m,)
// uint8, absmax (ceil(m / 256),) fp32) of a (m,) fp32 tensor.
std::pair<at::Tensor, at::Tensor> quantize_dynamic(const at::Tensor& x) {
  const at::Tensor in = x.contiguous().to(at::kCPU);
  const std::int64_t m = in.numel();
  const std::int64_t blocks = (m + kNf4NestedBlock - 1) / kNf4NestedBlock;
  at::Tensor codes = at::empty({m}, in.options().dtype(at::kByte));
  at::Tensor absmax = at::empty({blocks}, in.options());
  const float* src = in.data_ptr<float>();
  std::uint8_t* out = codes.data_ptr<std::uint8_t>();
  float* am = absmax.data_ptr<float>();
  const auto& table = dynamic_table();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kNf4NestedBlock;
    const std::int64_t end = std::min(begin + kNf4NestedBlock, m);
    float amax = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(src[i]));
    am[b] = amax;
    if (amax == 0.0f) {  // an all-zero block: code 0 throughout
      std::fill(out + begin, out + end, std::uint8_t{0});
      continue;
    }
    const float inv = 1.0f / amax;
    for (std::int64_t i = begin; i < end; ++i) {
      // Separate float steps, as the native kernel rounds them: scale, shift to [0, 1], onto
      // the grid, round half up (grid >= 0, so the floor is the kernel's truncation).
      const float v = std::clamp(src[i] * inv, -1.0f, 1.0f);
      const float unit = (v + 1.0f) * 0.5f;
      const float grid = unit * static_cast<float>(kGrid - 1);
      out[i] = table[static_cast<std::uint16_t>(std::floor(grid + 0.5f))];
    }
  }
  return {codes.to(x.device()), absmax.to(x.device())};
}

void check_block_size(std::int64_t bs) {
  SHARD_CHECK(bs >= 32 && bs <= 4096 && (bs & (bs - 1)) == 0, ErrorKind::internal,
              "NF4 block size " + std::to_string(bs) + " is not a power of two from 32 to 4096",
              "lora.quant_block_size is validated before the model is built; report this");
}

}  // namespace

at::Tensor nf4_code() {
  at::Tensor code = at::empty({16}, at::kFloat);
  for (std::size_t i = 0; i < kNf4Levels.size(); ++i)
    code.data_ptr<float>()[i] = static_cast<float>(kNf4Levels[i]);
  return code;
}

at::Tensor nf4_dynamic_map() {
  const auto& map = dynamic_map();
  return at::tensor(at::ArrayRef<float>(map.data(), map.size()), at::kFloat);
}

Nf4Weight quantize_nf4(const at::Tensor& weight, std::int64_t block_size, bool double_quant) {
  check_block_size(block_size);
  const auto dtype = weight.scalar_type();
  SHARD_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              ErrorKind::internal,
              std::string("NF4 quantizes fp32, bf16 or fp16 weights, not ") + c10::toString(dtype),
              "convert the weight first");
  const std::int64_t bs = block_size;
  const at::Tensor flat = weight.reshape(-1).to(at::kFloat);  // (n,)
  const std::int64_t n = flat.numel();
  const std::int64_t rem = n % bs;
  const std::int64_t full = n - rem;
  const at::Tensor whole = flat.slice(0, 0, full).reshape({full / bs, bs});  // (nb', bs)
  at::Tensor absmax = std::get<0>(whole.abs().max(-1));                      // (nb',)
  // Python's `1.0 / t` is t.reciprocal() * 1.0; the tail block divides.
  at::Tensor scaled =
      at::clamp(whole * at::reciprocal(absmax.clamp_min(1e-38)).view({-1, 1}), -1, 1).reshape(-1);
  if (rem > 0) {
    const at::Tensor tail = flat.slice(0, full);
    const at::Tensor am = tail.abs().max().clamp_min(1e-38);
    absmax = at::cat({absmax, am.unsqueeze(0)});
    scaled = at::cat({scaled, at::clamp(tail / am, -1, 1)});
  }
  if (scaled.numel() % 2 != 0) scaled = at::constant_pad_nd(scaled, {0, 1}, 0);
  const at::Tensor code = nf4_code().to(flat.device());
  const at::Tensor bounds = (code.slice(0, 0, -1) + code.slice(0, 1)) / 2;  // (15,)
  const at::Tensor q = at::bucketize(scaled, bounds, /*out_int32=*/true).to(at::kInt);
  const at::Tensor pairs = q.view({-1, 2});  // (n / 2, 2)
  const at::Tensor packed = (pairs.select(1, 0) * 16 + pairs.select(1, 1)).to(at::kByte);

  Nf4Weight out;
  out.packed = packed.contiguous();
  out.shape = weight.sizes().vec();
  out.dtype = dtype;
  out.block_size = bs;
  out.double_quant = double_quant;
  if (!double_quant) {
    out.absmax = absmax;
    return out;
  }
  out.offset = absmax.mean();
  auto [codes, nested] = quantize_dynamic(absmax - out.offset);
  out.absmax = codes;
  out.nested_absmax = nested;
  return out;
}

at::Tensor nf4_block_absmax(const Nf4Weight& nf4) {
  if (!nf4.double_quant) return nf4.absmax;
  const std::int64_t nb = nf4.absmax.numel();
  const std::int64_t nn = nf4.nested_absmax.numel();
  const at::Tensor map = nf4_dynamic_map().to(nf4.absmax.device());
  at::Tensor values = map.index_select(0, nf4.absmax.to(at::kLong));  // (nb,)
  values = at::constant_pad_nd(values, {0, nn * kNf4NestedBlock - nb}, 0);
  values = (values.view({nn, kNf4NestedBlock}) * nf4.nested_absmax.view({nn, 1})).reshape(-1);
  return values.slice(0, 0, nb) + nf4.offset;
}

at::Tensor dequantize_nf4(const Nf4Weight& nf4, at::ScalarType dtype) {
  check_block_size(nf4.block_size);
  std::int64_t n = 1;
  for (const auto d : nf4.shape) n *= d;
  const std::int64_t bs = nf4.block_size;
  const at::Tensor absmax = nf4_block_absmax(nf4);  // (nb,)
  const std::int64_t nb = absmax.numel();
  SHARD_CHECK(nb == (n + bs - 1) / bs && nf4.packed.numel() == (n + 1) / 2, ErrorKind::data,
              "NF4 weight of " + std::to_string(n) + " elements has " + std::to_string(nb) +
                  " absmax blocks of " + std::to_string(bs) + " and " +
                  std::to_string(nf4.packed.numel()) + " packed bytes",
              "the quantization metadata disagrees with the weight's shape");
  const at::Tensor bytes = nf4_bytes(nf4.packed).to(at::kInt);
  const at::Tensor codes = at::stack({bytes.div(16, "floor"), bytes.remainder(16)}, 1).view(-1);
  at::Tensor levels = nf4_code().to(bytes.device()).index_select(0, codes.to(at::kLong));
  levels = at::constant_pad_nd(levels.slice(0, 0, n), {0, nb * bs - n}, 0);  // (nb * bs,)
  const at::Tensor w = (levels.view({nb, bs}) * absmax.view({nb, 1})).reshape(-1).slice(0, 0, n);
  return w.to(dtype).reshape(nf4.shape);
}

namespace {

// Where the parts of a record sit (bytes from its start).
struct RecordLayout {
  std::int64_t n = 0;       // weight elements
  std::int64_t blocks = 0;  // nb
  std::int64_t nested = 0;  // nn (double quantization)
  std::int64_t codes = 0;   // the absmax codes (double quantization)
  std::int64_t packed = 0;  // the packed NF4 codes
  std::int64_t bytes = 0;   // the whole record, padded
};

RecordLayout record_layout(const std::vector<std::int64_t>& shape, std::int64_t block_size,
                           bool double_quant) {
  RecordLayout r;
  r.n = 1;
  for (const auto d : shape) r.n *= d;
  r.blocks = (r.n + block_size - 1) / block_size;
  r.nested = (r.blocks + kNf4NestedBlock - 1) / kNf4NestedBlock;
  r.codes = double_quant ? 4 * r.nested + 4 : 0;
  r.packed = double_quant ? r.codes + r.blocks : 4 * r.blocks;
  r.bytes = spec::nf4_record_bytes(r.n, block_size, double_quant);
  return r;
}

// `count` fp32 values at byte `at` of a record (aligned: records start on 4 bytes).
at::Tensor record_floats(const at::Tensor& record, std::int64_t at, std::int64_t count) {
  return record.narrow(0, at, 4 * count).view(at::kFloat);
}

}  // namespace

at::Tensor nf4_record(const Nf4Weight& nf4) {
  const RecordLayout r = record_layout(nf4.shape, nf4.block_size, nf4.double_quant);
  at::Tensor record = at::zeros({r.bytes}, nf4.packed.options().dtype(at::kByte));
  if (nf4.double_quant) {
    record_floats(record, 0, r.nested).copy_(nf4.nested_absmax.reshape(-1));
    record_floats(record, 4 * r.nested, 1).copy_(nf4.offset.reshape(-1));
    record.narrow(0, r.codes, r.blocks).copy_(nf4.absmax.reshape(-1));
  } else {
    record_floats(record, 0, r.blocks).copy_(nf4.absmax.reshape(-1));
  }
  record.narrow(0, r.packed, (r.n + 1) / 2).copy_(nf4.packed.reshape(-1));
  return record;
}

namespace {

// Levels times block absmax in fp32, each rounded once to T (c10's conversions round to nearest
// even, as Tensor.to does): dequantize_nf4's arithmetic without its temporaries.
template <class T>
void dequantize_cpu(const std::uint8_t* packed, const float* absmax, std::int64_t n,
                    std::int64_t block_size, T* out) {
  std::array<float, 16> levels{};
  for (std::size_t i = 0; i < levels.size(); ++i) levels[i] = static_cast<float>(kNf4Levels[i]);
  for (std::int64_t begin = 0; begin < n; begin += block_size) {
    const float scale = absmax[begin / block_size];
    const std::int64_t end = std::min(n, begin + block_size);
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint8_t byte = packed[i / 2];
      const int code = (i % 2 == 0) ? (byte >> 4) : (byte & 0x0F);
      out[i] = static_cast<T>(levels[static_cast<std::size_t>(code)] * scale);
    }
  }
}

Nf4Weight record_weight(const at::Tensor& record, const std::vector<std::int64_t>& shape,
                        std::int64_t block_size, bool double_quant) {
  const RecordLayout r = record_layout(shape, block_size, double_quant);
  SHARD_CHECK(record.scalar_type() == at::kByte && record.dim() == 1 && record.numel() == r.bytes,
              ErrorKind::internal,
              "an NF4 record of a " + std::to_string(r.n) + "-element weight must be " +
                  std::to_string(r.bytes) + " bytes, not " + std::to_string(record.numel()),
              "report this as a bug");
  Nf4Weight nf4;
  nf4.shape = shape;
  nf4.block_size = block_size;
  nf4.double_quant = double_quant;
  if (double_quant) {
    nf4.nested_absmax = record_floats(record, 0, r.nested);
    nf4.offset = record_floats(record, 4 * r.nested, 1).reshape({});
    nf4.absmax = record.narrow(0, r.codes, r.blocks);
  } else {
    nf4.absmax = record_floats(record, 0, r.blocks);
  }
  nf4.packed = record.narrow(0, r.packed, (r.n + 1) / 2);
  return nf4;
}

}  // namespace

void dequantize_nf4_record_into(const at::Tensor& record, const std::vector<std::int64_t>& shape,
                                std::int64_t block_size, bool double_quant, const at::Tensor& out) {
  const Nf4Weight nf4 = record_weight(record, shape, block_size, double_quant);
  const std::int64_t n = out.numel();
  SHARD_CHECK(out.is_contiguous() && n == spec::numel(shape), ErrorKind::internal,
              "NF4 dequantization needs a contiguous output of the weight's size",
              "report this as a bug");
  if (!out.is_cpu() || !record.is_cpu()) {
    out.copy_(dequantize_nf4(nf4, out.scalar_type()).reshape(out.sizes()));
    return;
  }
  const at::Tensor absmax = nf4_block_absmax(nf4).to(at::kFloat).contiguous();  // (nb,)
  const auto* packed = nf4.packed.data_ptr<std::uint8_t>();
  const auto* scale = absmax.data_ptr<float>();
  switch (out.scalar_type()) {
    case at::kFloat:
      dequantize_cpu(packed, scale, n, block_size, out.data_ptr<float>());
      return;
    case at::kBFloat16:
      dequantize_cpu(packed, scale, n, block_size, out.data_ptr<at::BFloat16>());
      return;
    case at::kHalf:
      dequantize_cpu(packed, scale, n, block_size, out.data_ptr<at::Half>());
      return;
    default:
      SHARD_FAIL(ErrorKind::internal,
                 std::string("NF4 dequantizes to fp32, bf16 or fp16, not ") +
                     c10::toString(out.scalar_type()),
                 "report this as a bug");
  }
}

at::Tensor dequantize_nf4_record(const at::Tensor& record, const std::vector<std::int64_t>& shape,
                                 std::int64_t block_size, bool double_quant, at::ScalarType dtype) {
  return dequantize_nf4(record_weight(record, shape, block_size, double_quant), dtype);
}

at::Tensor nf4_as_storage(const at::Tensor& packed, at::ScalarType storage) {
  SHARD_CHECK(packed.scalar_type() == at::kByte && packed.dim() == 1, ErrorKind::internal,
              "NF4 codes must be a 1-D uint8 tensor", "pass Nf4Weight::packed");
  const auto size = static_cast<std::int64_t>(c10::elementSize(storage));
  SHARD_CHECK(packed.numel() % size == 0, ErrorKind::config,
              "lora.quant_storage: a weight's " + std::to_string(packed.numel()) +
                  " packed bytes are not a whole number of " + c10::toString(storage) + " elements",
              "use quant_storage = \"uint8\"");
  return packed.contiguous().view(storage);
}

at::Tensor nf4_bytes(const at::Tensor& stored) {
  return stored.contiguous().view(at::kByte).reshape(-1);
}

}  // namespace shardscope::model
