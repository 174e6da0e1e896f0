// Philox4x32-10 from its published definition (Random123) and the
// index-addressed initialisation built on it.
#include "runtime/init/counter_rng.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace loom::runtime::init {
namespace {

// The round multipliers and the Weyl key increments (golden ratio and
// sqrt(3) - 1), as in Random123's philox.h.
constexpr uint32_t kMultiplier0 = 0xD2511F53;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9;
constexpr uint32_t kWeyl1 = 0xBB67AE85;

// 2^-24: turns the top 24 bits of a word into a float in [0, 1) exactly.
constexpr float kInverse2Pow24 = 1.0f / 16777216.0f;

std::array<uint32_t, 4> counterOf(uint64_t stream, uint64_t index) {
  return {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
          static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
}

std::array<uint32_t, 2> keyOf(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

std::string shapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    const uint64_t product0 = uint64_t{kMultiplier0} * counter[0];
    const uint64_t product1 = uint64_t{kMultiplier1} * counter[2];
    const auto hi0 = static_cast<uint32_t>(product0 >> 32);
    const auto lo0 = static_cast<uint32_t>(product0);
    const auto hi1 = static_cast<uint32_t>(product1 >> 32);
    const auto lo1 = static_cast<uint32_t>(product1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
  }
  return counter;
}

float uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint32_t word = philox4x32(counterOf(stream, index), keyOf(seed))[0];
  return static_cast<float>(word >> 8) * kInverse2Pow24;
}

float normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const std::array<uint32_t, 4> words = philox4x32(counterOf(stream, index), keyOf(seed));
  // u1 in (0, 1] keeps log finite; u2 in [0, 1). Double keeps the tail of
  // sqrt(-2 log u1) accurate before the final rounding to float.
  const double u1 = (static_cast<double>(words[0] >> 8) + 1.0) / 16777216.0;
  const double u2 = static_cast<double>(words[1] >> 8) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

absl::Status initShard(const InitSpec& spec, std::span<const int64_t> global_shape,
                       std::span<const int64_t> shard_offsets, std::span<const int64_t> shard_shape,
                       float* out) {
  const size_t rank = global_shape.size();
  if (shard_offsets.size() != rank || shard_shape.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("initShard: ranks differ: global shape ", shapeString(global_shape),
                     ", shard offsets ", shapeString(shard_offsets), ", shard shape ",
                     shapeString(shard_shape), "; give one offset and size per dim"));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (global_shape[d] <= 0 || shard_shape[d] <= 0 || shard_offsets[d] < 0 ||
        shard_offsets[d] + shard_shape[d] > global_shape[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "initShard: shard at offsets ", shapeString(shard_offsets), " of shape ",
          shapeString(shard_shape), " does not lie inside global shape ", shapeString(global_shape),
          " (dim ", d, "); sizes must be positive and offset + size <= dim"));
    }
  }
  int64_t count = 1;
  for (int64_t size : shard_shape) count *= size;
  if (spec.kind != InitSpec::Kind::kNormal) {
    std::fill_n(out, count, spec.kind == InitSpec::Kind::kOnes ? 1.0f : 0.0f);
    return absl::OkStatus();
  }
  // Row-major strides of the global tensor, then walk the shard's rows (its
  // last dim is contiguous in both) with an odometer over the outer dims.
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * global_shape[d];
  const int64_t inner = rank == 0 ? 1 : shard_shape[rank - 1];
  std::vector<int64_t> coords(rank, 0);
  for (int64_t written = 0; written < count; written += inner) {
    int64_t global = 0;
    for (size_t d = 0; d < rank; ++d) {
      global += (shard_offsets[d] + coords[d]) * strides[d];
    }
    for (int64_t j = 0; j < inner; ++j) {
      out[written + j] = spec.mean + spec.std * normal(spec.seed, spec.stream_id,
                                                       static_cast<uint64_t>(global + j));
    }
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++coords[d] < shard_shape[d]) break;
      coords[d] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime::init
