// An all-reduce in two rounds of direct messages whose result is, bit for
// bit, what Gloo's ring all-reduce (gloo::allreduce, the algorithm PyTorch's
// gloo backend calls) gives. The ring takes 2 (n - 1) steps, each waiting
// for a neighbour; when messages are small that wait, not the bytes, is the
// cost, and on a machine with fewer cores than ranks every step waits for a
// process to be scheduled. Here every rank sends each peer that peer's chunk
// at once (round 1), adds up the chunk it owns in the ring's order, and sends
// the sum to every peer at once (round 2): two waits instead of 2 (n - 1),
// for the same bytes on the wire. docs/comm.md ("all_reduce") has the
// measurements that set the size up to which the backend uses it.
#ifndef LOOM_COMM_GLOO_DIRECT_ALL_REDUCE_H_
#define LOOM_COMM_GLOO_DIRECT_ALL_REDUCE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "comm/gloo/gloo_reduce.h"
#include "gloo/context.h"

namespace loom::comm::gloo {

// Gloo's default bound on a ring segment (AllreduceOptions::kMaxSegmentSize).
inline constexpr size_t kRingMaxSegmentBytes = 1024 * 1024;

// One rank's chunk of the buffer in the ring: bytes [begin, end).
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// The chunk each rank's sum is built in, as gloo::allreduce's ring splits
// `total_bytes` of `element_size`-byte elements over `size` ranks with
// segments of at most `max_segment_bytes`: the buffer in equal segments, a
// whole number of them per rank and at least two, chunk r = rank r's
// segments (trailing chunks may be short or empty).
std::vector<ByteRange> ringChunks(size_t total_bytes, size_t element_size, int size,
                                  size_t max_segment_bytes = kRingMaxSegmentBytes);

// The ring's order of addition for chunk c: its partial sum travels from
// rank c - 1 down the ring to rank c, each rank adding its own values first,
// so the result is x[c] + (x[c+1] + (... + (x[c+n-2] + x[c+n-1]))) with
// ranks modulo n, each + being fn(out, own, received). `copies[k]` holds rank
// (c + k) % n's copy of the chunk, k = 0..n-1; the sum lands in copies[0].
// copies[1..n-1] are used as scratch.
void reduceInRingOrder(ReduceFn fn, const std::vector<uint8_t*>& copies, size_t elements);

// Scratch bytes directAllReduce needs on this rank: one copy of its chunk
// per rank.
size_t directAllReduceScratchBytes(size_t total_bytes, size_t element_size, int rank, int size);

// All-reduces `total_bytes` at `data` in place on every rank of `context`
// with `fn`; `scratch` holds directAllReduceScratchBytes(). Every rank calls
// it with the same size, element size, function and tag. Gloo's transport
// errors (timeouts, lost peers) come out as Gloo's exceptions, as from
// Gloo's own algorithms; a wait that an abort interrupted returns an
// aborted error.
absl::Status directAllReduce(::gloo::Context& context, void* data, size_t total_bytes,
                             size_t element_size, ReduceFn fn, uint32_t tag,
                             std::chrono::milliseconds timeout, uint8_t* scratch);

}  // namespace loom::comm::gloo

#endif  // LOOM_COMM_GLOO_DIRECT_ALL_REDUCE_H_
