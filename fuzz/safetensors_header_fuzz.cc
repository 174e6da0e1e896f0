// libFuzzer target: the safetensors header parser (runtime/hf/safetensors.h).
// The input's first 8 bytes give the size of the data buffer (modulo 1 MiB),
// the rest is the header's JSON. A header that parses must keep every tensor
// inside the buffer, sized numel x dtype size, and disjoint from the others;
// the writer's layout of the same tensors must parse back to the same shapes.
// Nothing may crash, throw, or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/hf/safetensors.h"

namespace hf = loom::runtime::hf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t raw = 0;
  std::memcpy(&raw, data, 8);
  const int64_t data_bytes = static_cast<int64_t>(raw % (uint64_t{1} << 20));
  const std::string text(reinterpret_cast<const char*>(data) + 8, size - 8);
  absl::StatusOr<hf::Header> header = hf::parseHeader(text, data_bytes, "fuzz");
  if (!header.ok()) return 0;
  std::vector<hf::TensorSpec> specs;
  int64_t previous_end = 0;
  for (const hf::TensorEntry& t : header->tensors) {
    if (t.begin < previous_end || t.end > data_bytes || t.begin > t.end) std::abort();
    previous_end = t.end;
    specs.push_back({t.name, t.dtype, t.shape});
  }
  absl::StatusOr<hf::FileLayout> layout = hf::layoutFile(specs, header->metadata);
  if (!layout.ok()) std::abort();
  const std::string json = layout->header.substr(8);
  const int64_t written = layout->fileBytes() - static_cast<int64_t>(layout->header.size());
  absl::StatusOr<hf::Header> again = hf::parseHeader(json, written, "fuzz-again");
  if (!again.ok() || again->tensors.size() != specs.size()) std::abort();
  for (const hf::TensorSpec& s : specs) {
    const hf::TensorEntry* t = again->find(s.name);
    if (t == nullptr || t->shape != s.shape || t->dtype != s.dtype) std::abort();
  }
  return 0;
}
