// The two-round all-reduce in the ring's order of addition; see
// direct_all_reduce.h.
#include "comm/gloo/direct_all_reduce.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "gloo/math.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace loom::comm::gloo {
namespace {

// Slot prefixes of the two rounds: apart from Gloo's own (0x01-0x0c) and
// from send/recv's (0x80), so that they never meet another call's messages.
constexpr uint8_t kScatterRoundSlotPrefix = 0x90;
constexpr uint8_t kGatherRoundSlotPrefix = 0x91;

size_t ceilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// Waits for `count` completions of one kind on `buffer`.
absl::Status awaitAll(::gloo::transport::UnboundBuffer* buffer, int count, bool sends,
                      std::chrono::milliseconds timeout) {
  for (int i = 0; i < count; ++i) {
    const bool done = sends ? buffer->waitSend(timeout) : buffer->waitRecv(timeout);
    if (!done) {
      return makeError(
          ErrorKind::kBackend, absl::StatusCode::kAborted,
          absl::StrCat("the all-reduce's ", sends ? "send" : "receive", " was aborted"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<ByteRange> ringChunks(size_t total_bytes, size_t element_size, int size,
                                  size_t max_segment_bytes) {
  const size_t n = static_cast<size_t>(size);
  // gloo/allreduce.cc (ring): the segment bound rounded down to whole
  // elements, then as many segments as that bound needs (at least two per
  // rank), rounded up to a multiple of the ranks, each of the same size
  // rounded up to whole elements.
  const size_t max_segment = element_size * std::max<size_t>(1, max_segment_bytes / element_size);
  const size_t segments = ::gloo::roundUp(std::max(ceilDiv(total_bytes, max_segment), 2 * n), n);
  const size_t segment_bytes = ::gloo::roundUp(ceilDiv(total_bytes, segments), element_size);
  const size_t chunk_bytes = segment_bytes * (segments / n);
  std::vector<ByteRange> chunks(n);
  for (size_t r = 0; r < n; ++r) {
    chunks[r].begin = std::min(total_bytes, r * chunk_bytes);
    chunks[r].end = std::min(total_bytes, (r + 1) * chunk_bytes);
  }
  return chunks;
}

void reduceInRingOrder(ReduceFn fn, const std::vector<uint8_t*>& copies, size_t elements) {
  const size_t n = copies.size();
  if (n < 2 || elements == 0) return;
  // The partial sum that reaches rank c + k from rank c + k + 1 is added to
  // rank c + k's own values: own first, received second.
  uint8_t* partial = copies[n - 1];
  for (size_t k = n - 2; k >= 1; --k) fn(partial, copies[k], partial, elements);
  fn(copies[0], copies[0], partial, elements);
}

size_t directAllReduceScratchBytes(size_t total_bytes, size_t element_size, int rank, int size) {
  return ringChunks(total_bytes, element_size, size)[rank].size() * static_cast<size_t>(size);
}

absl::Status directAllReduce(::gloo::Context& context, void* data, size_t total_bytes,
                             size_t element_size, ReduceFn fn, uint32_t tag,
                             std::chrono::milliseconds timeout, uint8_t* scratch) {
  const int n = context.size;
  const int rank = context.rank;
  if (n == 1 || total_bytes == 0) return absl::OkStatus();
  const std::vector<ByteRange> chunks = ringChunks(total_bytes, element_size, n);
  const size_t mine = chunks[rank].size();
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer =
      context.createUnboundBuffer(data, total_bytes);
  // Copy k of this rank's chunk, from rank (rank + k) % n, at k * mine
  // (copy 0, the own one, stays in `data`).
  std::unique_ptr<::gloo::transport::UnboundBuffer> copies =
      mine > 0 ? context.createUnboundBuffer(scratch, mine * n) : nullptr;

  // Round 2's receives are posted first: Gloo sends a message only once its
  // receiver has said it is ready, and saying so early takes that hop off
  // the second round. Peer q's sum lands on the chunk round 1 sends it, but
  // only after q has received that chunk in full, so after this rank's send
  // of it has read it.
  const uint64_t scatter_slot = ::gloo::Slot::build(kScatterRoundSlotPrefix, tag);
  const uint64_t gather_slot = ::gloo::Slot::build(kGatherRoundSlotPrefix, tag);
  int gathered = 0;
  for (int step = 1; step < n; ++step) {
    const int from = (rank + n - step) % n;
    if (chunks[from].size() > 0) {
      buffer->recv(from, gather_slot, chunks[from].begin, chunks[from].size());
      ++gathered;
    }
  }
  // Round 1: each peer's chunk to that peer, this rank's chunk from each.
  int sends = 0;
  int receives = 0;
  for (int step = 1; step < n; ++step) {
    const int to = (rank + step) % n;
    const int from = (rank + n - step) % n;
    if (chunks[to].size() > 0) {
      buffer->send(to, scatter_slot, chunks[to].begin, chunks[to].size());
      ++sends;
    }
    if (mine > 0) {
      copies->recv(from, scatter_slot, static_cast<size_t>((from - rank + n) % n) * mine, mine);
      ++receives;
    }
  }
  if (absl::Status s = awaitAll(copies.get(), receives, false, timeout); !s.ok()) return s;

  if (mine > 0) {
    std::vector<uint8_t*> terms(n);
    terms[0] = static_cast<uint8_t*>(data) + chunks[rank].begin;
    for (int k = 1; k < n; ++k) terms[k] = scratch + static_cast<size_t>(k) * mine;
    reduceInRingOrder(fn, terms, mine / element_size);
  }

  // Round 2: this rank's sum to every peer.
  for (int step = 1; step < n; ++step) {
    if (mine > 0) {
      buffer->send((rank + step) % n, gather_slot, chunks[rank].begin, mine);
      ++sends;
    }
  }
  if (absl::Status s = awaitAll(buffer.get(), gathered, false, timeout); !s.ok()) return s;
  return awaitAll(buffer.get(), sends, true, timeout);
}

}  // namespace loom::comm::gloo
