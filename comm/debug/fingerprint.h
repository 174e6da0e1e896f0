// Cross-rank checks of collective calls: before a collective runs, every rank
// compares what it is about to call (op, sequence number, dtype, element
// count, root, reduce op; shapes in detail mode) with the rest of its group
// over a side CPU backend, and a mismatch becomes an error that says who
// called what ("rank 1 called reduce, ranks 0,2,3 called all_reduce")
// instead of a hang or corrupt data.
#ifndef LOOM_COMM_DEBUG_FINGERPRINT_H_
#define LOOM_COMM_DEBUG_FINGERPRINT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/reduce_op.h"
#include "comm/store.h"
#include "comm/tensor.h"

namespace loom::comm::debug {

// What every rank of a group must agree on for one call.
struct CollectiveFingerprint {
  uint64_t seq = 0;
  std::string op;
  DType dtype = DType::kFloat32;
  int64_t numel = 0;  // total elements this rank contributes or receives
  int root = -1;      // -1 when the op has no root
  std::optional<ReduceOp> reduce_op;
  // Filled in detail mode only: every tensor argument's shape.
  std::vector<std::vector<int64_t>> shapes;

  // "all_reduce #7 f32 x 1024 (sum)" plus shapes when present.
  std::string describe() const;
  // A fixed-size (kEncodedSize bytes) encoding for the cheap all-gather, and
  // its inverse. The shapes travel as a 64-bit hash only, so that the blob
  // stays fixed-size; decode() restores every other field and leaves
  // `shapes` empty. Op names longer than kMaxOpLength bytes are cut.
  static constexpr size_t kEncodedSize = 64;
  static constexpr size_t kMaxOpLength = 24;
  Bytes encode() const;
  static absl::StatusOr<CollectiveFingerprint> decode(const Bytes& bytes);

  friend bool operator==(const CollectiveFingerprint&, const CollectiveFingerprint&) = default;
};

// Compares fingerprints across a group. Owns nothing of the group's main
// backend: it talks over `side_backend`, a CPU backend (Gloo) of the same
// ranks that only ever carries fingerprints, so a check cannot deadlock
// behind the collective it guards. `store` (the group's store, may be null)
// is touched only when a check waits long or fails: ranks leave an arrival
// key there so that a timeout can name the ranks that never came. One
// thread at a time calls check(), as the front end issues calls in order.
class FingerprintChecker {
 public:
  FingerprintChecker(std::unique_ptr<Backend> side_backend, std::shared_ptr<Store> store,
                     std::string group_name, absl::Duration timeout);

  // Blocks until every rank of the group has checked the same call, or
  // fails: with an invalid-argument error naming each distinct call and the
  // ranks that made it when they differ, or with a timeout error naming the
  // ranks that never reached the check. Every rank that takes part gets the
  // same verdict.
  absl::Status check(const CollectiveFingerprint& fingerprint);

 private:
  // One all-gather of `input` (the same size on every rank) over the side
  // backend. With `report_arrival`, a slow gather leaves this rank's arrival
  // key in the store and a failed one becomes arrivalError().
  absl::StatusOr<Bytes> allGather(Bytes input, const CollectiveFingerprint& fp,
                                  bool report_arrival);
  // The shapes encodings of every rank, when the fingerprints say any has
  // some: a second all-gather, padded to the longest.
  absl::StatusOr<std::vector<Bytes>> gatherShapes(const std::vector<Bytes>& blobs,
                                                  const CollectiveFingerprint& fp);
  std::string arrivalKey(uint64_t check, int rank) const;
  // The error of a failed side all-gather: names the ranks that did not
  // leave an arrival key for this check.
  absl::Status arrivalError(const absl::Status& failure, const CollectiveFingerprint& fp);

  std::unique_ptr<Backend> side_backend_;
  std::shared_ptr<Store> store_;
  std::string group_name_;
  absl::Duration timeout_;
  uint64_t checks_ = 0;
  // Numbers the side all-gathers (a check makes one or two), so that each
  // has its own sequence number and thus its own Gloo tag.
  uint64_t side_calls_ = 0;
  bool arrived_reported_ = false;
};

}  // namespace loom::comm::debug

#endif  // LOOM_COMM_DEBUG_FINGERPRINT_H_
