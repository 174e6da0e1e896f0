// Counter-based random numbers (Philox4x32-10) and parameter initialisation
// by global element index: an element's initial value depends only on
// (seed, the parameter's stream id, its index in the unsharded tensor), so
// every sharding of a model starts from the same weights.
#ifndef LOOM_RUNTIME_INIT_COUNTER_RNG_H_
#define LOOM_RUNTIME_INIT_COUNTER_RNG_H_

#include <array>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "plan/init_spec.h"

namespace loom::runtime::init {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the generator of cuRAND, JAX and PyTorch's CUDA
// RNG: a keyed bijection of a 128-bit counter.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A uniform float in [0, 1) for element `index` of stream `stream`: the
// first Philox word of counter (index, stream) under key `seed`, top 24 bits.
float uniform(uint64_t seed, uint64_t stream, uint64_t index);

// A standard normal float for the same triple: Box-Muller on the first two
// Philox words of that counter.
float normal(uint64_t seed, uint64_t stream, uint64_t index);

// The plan format's init spec (plan/init_spec.h).
using InitSpec = plan::InitSpec;

// Fills `out` (row-major, shard_shape) with the sub-box of the parameter of
// `global_shape` that starts at `shard_offsets`. InvalidArgument when the
// ranks differ, a size is not positive or the box leaves the tensor.
absl::Status initShard(const InitSpec& spec, std::span<const int64_t> global_shape,
                       std::span<const int64_t> shard_offsets, std::span<const int64_t> shard_shape,
                       float* out);

}  // namespace loom::runtime::init

#endif  // LOOM_RUNTIME_INIT_COUNTER_RNG_H_
