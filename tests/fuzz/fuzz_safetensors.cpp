// The safetensors reader (trainer/base/safetensors): the input is a .safetensors file. Opening
// it must check every header entry against the file or refuse it with a TrainerError naming the
// file; every tensor of an opened file can then be read whole and in slices without touching a
// byte outside the mapping (ASan watches the copies).
#include <ATen/ATen.h>

#include "tests/fuzz/fuzz_support.h"
#include "trainer/base/fatal.h"
#include "trainer/base/safetensors.h"

using namespace shardscope;

namespace {

void read_all(const ckpt::MappedSafetensors& file) {
  for (const auto& e : file.entries()) {
    if (file.find(e.name) == nullptr) fuzz::broken("an entry find() does not return");
    const at::Tensor whole = file.read(e);
    const auto numel = whole.numel();
    if (numel * static_cast<std::int64_t>(whole.element_size()) != e.end - e.begin)
      fuzz::broken("a tensor's bytes differ from its data_offsets");
    const auto half = numel / 2;
    const at::Tensor tail = file.read_elements(e, half, numel - half);
    if (tail.numel() != numel - half) fuzz::broken("read_elements returned another count");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::as_file(data, size, "fuzz.safetensors");
  try {
    const ckpt::MappedSafetensors file(path);
    read_all(file);
  } catch (const trainer::TrainerError& e) {
    fuzz::expect_clear_error(e.what(), path);
  }
  return 0;
}
