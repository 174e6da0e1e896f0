// Fingerprint encoding and the cross-rank check: one all-gather of a 64-byte
// blob per call, a local comparison, and on a mismatch a message every rank
// builds alike from the same gathered bytes.
#include "comm/debug/fingerprint.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "comm/errors.h"

namespace loom::comm::debug {
namespace {

// Blob layout, little-endian:
//   0  'L' 'F'     magic
//   2  u8          version
//   3  u8          dtype
//   4  u8          reduce op, kNoReduceOp when none
//   5  u8          op name length
//   6  u16         zero
//   8  u64         seq
//   16 i64         numel
//   24 i32         root
//   28 u32         byte length of the shapes encoding (0 without shapes)
//   32 u64         FNV-1a hash of the shapes encoding (0 without shapes)
//   40 char[24]    op name, zero-padded
constexpr uint8_t kVersion = 1;
constexpr uint8_t kNoReduceOp = 0xff;
constexpr size_t kShapesLengthOffset = 28;
constexpr size_t kShapesHashOffset = 32;
constexpr size_t kOpOffset = 40;
static_assert(kOpOffset + CollectiveFingerprint::kMaxOpLength ==
              CollectiveFingerprint::kEncodedSize);

// A healthy check finishes in microseconds; one that waits this long (or
// half the timeout, if shorter) is slow enough that leaving an arrival key in
// the store costs nothing in comparison, and a later timeout can then tell
// who came.
constexpr absl::Duration kArrivalReportDelay = absl::Seconds(1);
absl::Duration arrivalDelay(absl::Duration timeout) {
  return std::min(timeout / 2, kArrivalReportDelay);
}

void putU64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
void putU32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint64_t getU64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}
uint32_t getU32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}

// Stable across processes and builds, unlike absl::Hash, because ranks
// compare the hashes they computed separately.
uint64_t fnv1a(const Bytes& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// u32 count, then per shape u32 rank and that many i64 dims.
Bytes encodeShapes(const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.empty()) return {};
  size_t size = 4;
  for (const auto& shape : shapes) size += 4 + 8 * shape.size();
  Bytes out(size);
  uint8_t* p = out.data();
  putU32(p, static_cast<uint32_t>(shapes.size()));
  p += 4;
  for (const auto& shape : shapes) {
    putU32(p, static_cast<uint32_t>(shape.size()));
    p += 4;
    for (int64_t dim : shape) {
      putU64(p, static_cast<uint64_t>(dim));
      p += 8;
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> decodeShapes(const uint8_t* data, size_t size) {
  std::vector<std::vector<int64_t>> shapes;
  if (size == 0) return shapes;
  const uint8_t* const end = data + size;
  auto truncated = [&] {
    return invalidArgumentError(
        absl::StrCat("shape list of ", size, " bytes is truncated; peers must run the same loom"));
  };
  if (end - data < 4) return truncated();
  const uint32_t count = getU32(data);
  data += 4;
  for (uint32_t i = 0; i < count; ++i) {
    if (end - data < 4) return truncated();
    const uint32_t ndim = getU32(data);
    data += 4;
    if (static_cast<size_t>(end - data) / 8 < ndim) return truncated();
    std::vector<int64_t>& shape = shapes.emplace_back();
    for (uint32_t d = 0; d < ndim; ++d, data += 8) {
      shape.push_back(static_cast<int64_t>(getU64(data)));
    }
  }
  if (data != end) {
    return invalidArgumentError(absl::StrCat("shape list of ", size, " bytes has ", end - data,
                                             " bytes after its ", count, " shapes"));
  }
  return shapes;
}

std::string shapesText(const std::vector<std::vector<int64_t>>& shapes) {
  return absl::StrCat("[",
                      absl::StrJoin(shapes, ", ",
                                    [](std::string* out, const std::vector<int64_t>& shape) {
                                      absl::StrAppend(out, "[", absl::StrJoin(shape, ", "), "]");
                                    }),
                      "]");
}

std::string str(std::string_view text) { return std::string(text); }

// "rank 1" or "ranks 0,2,3".
std::string ranksText(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

// The arguments of a call without its sequence number:
// "f32 x 1024, root 0, sum, shapes [[32, 32]]".
std::string argumentsText(const CollectiveFingerprint& fp) {
  std::string text = absl::StrCat(str(dtypeName(fp.dtype)), " x ", fp.numel);
  if (fp.root >= 0) absl::StrAppend(&text, ", root ", fp.root);
  if (fp.reduce_op) absl::StrAppend(&text, ", ", str(reduceOpName(*fp.reduce_op)));
  if (!fp.shapes.empty()) absl::StrAppend(&text, ", shapes ", shapesText(fp.shapes));
  return text;
}

struct CallGroup {
  CollectiveFingerprint fingerprint;
  uint64_t shapes_hash = 0;  // what is known of the shapes when their list could not be fetched
  std::vector<int> ranks;    // ascending
};

// One field of a fingerprint, for the "ranks disagree on X" message.
struct Field {
  const char* name;
  std::string (*value)(const CallGroup&);
};

const Field kFields[] = {
    {"sequence number", [](const CallGroup& g) { return absl::StrCat(g.fingerprint.seq); }},
    {"op", [](const CallGroup& g) { return g.fingerprint.op; }},
    {"dtype", [](const CallGroup& g) { return str(dtypeName(g.fingerprint.dtype)); }},
    {"element count", [](const CallGroup& g) { return absl::StrCat(g.fingerprint.numel); }},
    {"root",
     [](const CallGroup& g) {
       return g.fingerprint.root >= 0 ? absl::StrCat(g.fingerprint.root) : std::string("none");
     }},
    {"reduce op",
     [](const CallGroup& g) {
       return g.fingerprint.reduce_op ? str(reduceOpName(*g.fingerprint.reduce_op))
                                      : std::string("none");
     }},
    {"shapes",
     [](const CallGroup& g) {
       if (g.fingerprint.shapes.empty() && g.shapes_hash != 0) {
         return absl::StrCat("shapes with hash ", absl::Hex(g.shapes_hash));
       }
       return shapesText(g.fingerprint.shapes);
     }},
};
constexpr int kOpField = 1;

// The mismatch message. Groups come smallest first (the odd rank out leads,
// as it is usually the culprit), ties broken by lowest rank; the call number
// is that of the largest group.
std::string mismatchMessage(const std::string& group_name, std::vector<CallGroup> groups) {
  std::sort(groups.begin(), groups.end(), [](const CallGroup& a, const CallGroup& b) {
    if (a.ranks.size() != b.ranks.size()) return a.ranks.size() < b.ranks.size();
    return a.ranks.front() < b.ranks.front();
  });
  const CallGroup* reference = &groups.front();
  for (const CallGroup& g : groups) {
    if (g.ranks.size() > reference->ranks.size()) reference = &g;
  }
  const CollectiveFingerprint& ref = reference->fingerprint;

  std::vector<int> differing;
  for (int f = 0; f < static_cast<int>(std::size(kFields)); ++f) {
    for (const CallGroup& g : groups) {
      if (kFields[f].value(g) != kFields[f].value(*reference)) {
        differing.push_back(f);
        break;
      }
    }
  }

  std::string text =
      absl::StrCat("collective mismatch in group ", group_name, " at call #", ref.seq);
  if (differing.size() == 1 && differing.front() != kOpField) {
    const Field& field = kFields[differing.front()];
    absl::StrAppend(&text, " (", ref.op, "): ranks disagree on ", field.name, ": ");
    absl::StrAppend(&text, absl::StrJoin(groups, ", ", [&](std::string* out, const CallGroup& g) {
      absl::StrAppend(out, ranksText(g.ranks), g.ranks.size() == 1 ? " has " : " have ",
                      field.value(g));
    }));
  } else {
    absl::StrAppend(
        &text, ": ", absl::StrJoin(groups, ", ", [&](std::string* out, const CallGroup& g) {
          const CollectiveFingerprint& fp = g.fingerprint;
          absl::StrAppend(out, ranksText(g.ranks), " called ", fp.op, "(", argumentsText(fp), ")");
          if (fp.seq != ref.seq) absl::StrAppend(out, " as call #", fp.seq);
        }));
  }
  absl::StrAppend(&text,
                  "; every rank of a group must issue the same collectives, in the same order, "
                  "with matching arguments");
  return text;
}

}  // namespace

std::string CollectiveFingerprint::describe() const {
  std::string text = absl::StrCat(op, " #", seq, " ", str(dtypeName(dtype)), " x ", numel);
  std::vector<std::string> extras;
  if (root >= 0) extras.push_back(absl::StrCat("root ", root));
  if (reduce_op) extras.push_back(str(reduceOpName(*reduce_op)));
  if (!extras.empty()) absl::StrAppend(&text, " (", absl::StrJoin(extras, ", "), ")");
  if (!shapes.empty()) absl::StrAppend(&text, " shapes ", shapesText(shapes));
  return text;
}

Bytes CollectiveFingerprint::encode() const {
  Bytes out(kEncodedSize, 0);
  out[0] = 'L';
  out[1] = 'F';
  out[2] = kVersion;
  out[3] = static_cast<uint8_t>(dtype);
  out[4] = reduce_op ? static_cast<uint8_t>(*reduce_op) : kNoReduceOp;
  const size_t op_length = std::min(op.size(), kMaxOpLength);
  out[5] = static_cast<uint8_t>(op_length);
  putU64(&out[8], seq);
  putU64(&out[16], static_cast<uint64_t>(numel));
  putU32(&out[24], static_cast<uint32_t>(root));
  const Bytes shape_bytes = encodeShapes(shapes);
  putU32(&out[kShapesLengthOffset], static_cast<uint32_t>(shape_bytes.size()));
  putU64(&out[kShapesHashOffset], shape_bytes.empty() ? 0 : fnv1a(shape_bytes));
  std::memcpy(&out[kOpOffset], op.data(), op_length);
  return out;
}

absl::StatusOr<CollectiveFingerprint> CollectiveFingerprint::decode(const Bytes& bytes) {
  auto bad = [](std::string_view why) {
    return invalidArgumentError(absl::StrCat(
        "not a collective fingerprint: ", str(why),
        "; every rank of the group must run the same loom build with the same checks"));
  };
  if (bytes.size() != kEncodedSize) {
    return bad(absl::StrCat(bytes.size(), " bytes, expected ", kEncodedSize));
  }
  if (bytes[0] != 'L' || bytes[1] != 'F') return bad("bad magic");
  if (bytes[2] != kVersion) {
    return bad(absl::StrCat("version ", bytes[2], ", this build reads version ", kVersion));
  }
  CollectiveFingerprint fp;
  if (bytes[3] >= std::size(kAllDTypes)) return bad(absl::StrCat("dtype code ", bytes[3]));
  fp.dtype = static_cast<DType>(bytes[3]);
  if (bytes[4] != kNoReduceOp) {
    if (bytes[4] >= std::size(kAllReduceOps)) return bad(absl::StrCat("reduce op code ", bytes[4]));
    fp.reduce_op = static_cast<ReduceOp>(bytes[4]);
  }
  const size_t op_length = bytes[5];
  if (op_length > kMaxOpLength) return bad(absl::StrCat("op name of ", op_length, " bytes"));
  if (bytes[6] != 0 || bytes[7] != 0) return bad("nonzero padding");
  for (size_t i = kOpOffset + op_length; i < kEncodedSize; ++i) {
    if (bytes[i] != 0) return bad("bytes after the op name");
  }
  fp.op.assign(reinterpret_cast<const char*>(&bytes[kOpOffset]), op_length);
  fp.seq = getU64(&bytes[8]);
  fp.numel = static_cast<int64_t>(getU64(&bytes[16]));
  if (fp.numel < 0) return bad(absl::StrCat("element count ", fp.numel));
  fp.root = static_cast<int32_t>(getU32(&bytes[24]));
  if (fp.root < -1) return bad(absl::StrCat("root ", fp.root));
  return fp;
}

FingerprintChecker::FingerprintChecker(std::unique_ptr<Backend> side_backend,
                                       std::shared_ptr<Store> store, std::string group_name,
                                       absl::Duration timeout)
    : side_backend_(std::move(side_backend)),
      store_(std::move(store)),
      group_name_(std::move(group_name)),
      timeout_(timeout) {}

std::string FingerprintChecker::arrivalKey(uint64_t check, int rank) const {
  return absl::StrCat("loom/fingerprint/", group_name_, "/", check, "/", rank);
}

absl::StatusOr<Bytes> FingerprintChecker::allGather(Bytes input, const CollectiveFingerprint& fp,
                                                    bool report_arrival) {
  const int size = side_backend_->size();
  // The views below point into this; the completion callback keeps it alive
  // until the backend is done with it, even when a wait gives up first.
  struct Buffers {
    Bytes input;
    Bytes output;
  };
  auto buffers = std::make_shared<Buffers>();
  buffers->input = std::move(input);
  buffers->output.resize(buffers->input.size() * size);
  const CollectiveInfo info{side_backend_->groupName(), side_backend_->rank(), size, ++side_calls_,
                            "all_gather_into_tensor"};
  AllGatherOptions options;
  options.timeout = timeout_;
  auto work = side_backend_->allGatherIntoTensor(
      Tensor(buffers->output.data(), DType::kUInt8, {static_cast<int64_t>(buffers->output.size())}),
      Tensor(buffers->input.data(), DType::kUInt8, {static_cast<int64_t>(buffers->input.size())}),
      options, info);
  if (!work.ok()) return report_arrival ? arrivalError(work.status(), fp) : work.status();

  auto done = std::make_shared<absl::Notification>();
  (*work)->onCompletion([done, buffers](const absl::Status&) { done->Notify(); });
  if (report_arrival && store_ != nullptr &&
      !done->WaitForNotificationWithTimeout(arrivalDelay(timeout_))) {
    // Best effort: a store that fails here fails again in arrivalError,
    // which reports it.
    arrived_reported_ = store_->set(arrivalKey(checks_, side_backend_->rank()), {1}).ok();
  }
  const absl::Status status = (*work)->wait(timeout_);
  if (!status.ok()) return report_arrival ? arrivalError(status, fp) : status;
  // Completed: the backend no longer touches the buffers.
  return std::move(buffers->output);
}

absl::Status FingerprintChecker::arrivalError(const absl::Status& failure,
                                              const CollectiveFingerprint& fp) {
  const std::string prefix =
      absl::StrCat(fp.op, " #", fp.seq, " in group ", group_name_, ": the cross-rank check #",
                   checks_, " failed after waiting up to ", absl::FormatDuration(timeout_));
  if (store_ == nullptr) {
    return makeError(errorKind(failure), failure.code(),
                     absl::StrCat(prefix, " (", failure.message(),
                                  "); no store was given to tell which ranks did not arrive"));
  }
  const int size = side_backend_->size();
  const std::string my_key = arrivalKey(checks_, side_backend_->rank());
  if (!arrived_reported_) {
    if (absl::Status set = store_->set(my_key, {1}); !set.ok()) {
      return makeError(
          errorKind(failure), failure.code(),
          absl::StrCat(prefix, " (", failure.message(),
                       "); could not compare arrivals through the store: ", set.message()));
    }
    arrived_reported_ = true;
  }
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(arrivalKey(checks_, r));
  std::vector<int> arrived;
  std::vector<int> missing;
  // Ranks that came late but in time leave their key within this delay.
  if (store_->wait(keys, arrivalDelay(timeout_)).ok()) {
    for (int r = 0; r < size; ++r) arrived.push_back(r);
  } else {
    for (int r = 0; r < size; ++r) {
      absl::StatusOr<bool> there = store_->check({keys[r]});
      (there.ok() && *there ? arrived : missing).push_back(r);
    }
  }
  if (missing.empty()) {
    return makeError(errorKind(failure), failure.code(),
                     absl::StrCat(prefix,
                                  ": every rank reached it, but the side all-gather "
                                  "failed: ",
                                  failure.message()));
  }
  return timeoutError(absl::StrCat(
      prefix, ": ", ranksText(missing), " did not reach it (", ranksText(arrived),
      " did); look at ", missing.size() == 1 ? "that rank" : "those ranks",
      ": crashed, stuck earlier, or skipped this collective (side all-gather: ", failure.message(),
      ")"));
}

absl::StatusOr<std::vector<Bytes>> FingerprintChecker::gatherShapes(
    const std::vector<Bytes>& blobs, const CollectiveFingerprint& fp) {
  size_t longest = 0;
  for (const Bytes& blob : blobs) {
    longest = std::max<size_t>(longest, getU32(&blob[kShapesLengthOffset]));
  }
  std::vector<Bytes> shapes(blobs.size());
  if (longest == 0) return shapes;
  Bytes input = encodeShapes(fp.shapes);
  input.resize(longest, 0);
  absl::StatusOr<Bytes> gathered = allGather(std::move(input), fp, /*report_arrival=*/false);
  if (!gathered.ok()) return gathered.status();
  for (size_t r = 0; r < blobs.size(); ++r) {
    const size_t length = getU32(&blobs[r][kShapesLengthOffset]);
    shapes[r].assign(gathered->begin() + r * longest, gathered->begin() + r * longest + length);
  }
  return shapes;
}

absl::Status FingerprintChecker::check(const CollectiveFingerprint& fingerprint) {
  ++checks_;
  arrived_reported_ = false;
  const Bytes mine = fingerprint.encode();
  absl::StatusOr<Bytes> gathered = allGather(mine, fingerprint, /*report_arrival=*/true);
  if (!gathered.ok()) return gathered.status();
  if (arrived_reported_) {
    // Everyone arrived, so nobody needs this key to name the missing.
    (void)store_->deleteKey(arrivalKey(checks_, side_backend_->rank()));
  }

  const size_t blob_size = CollectiveFingerprint::kEncodedSize;
  const int size = side_backend_->size();
  bool all_equal = true;
  for (int r = 0; r < size && all_equal; ++r) {
    all_equal = std::memcmp(gathered->data() + r * blob_size, mine.data(), blob_size) == 0;
  }
  if (all_equal) return absl::OkStatus();

  std::vector<Bytes> blobs;
  std::vector<CollectiveFingerprint> fingerprints;
  for (int r = 0; r < size; ++r) {
    blobs.emplace_back(gathered->begin() + r * blob_size, gathered->begin() + (r + 1) * blob_size);
    absl::StatusOr<CollectiveFingerprint> fp = CollectiveFingerprint::decode(blobs.back());
    if (!fp.ok()) {
      return backendError(
          absl::StrCat(fingerprint.op, " #", fingerprint.seq, " in group ", group_name_, ": rank ",
                       r, " sent an unreadable fingerprint (", fp.status().message(), ")"));
    }
    fingerprints.push_back(*std::move(fp));
  }
  // Every rank saw the same blobs, so every rank takes this second exchange
  // or none does. Its failure only costs the shapes in the message.
  if (absl::StatusOr<std::vector<Bytes>> shapes = gatherShapes(blobs, fingerprint); shapes.ok()) {
    for (int r = 0; r < size; ++r) {
      const uint8_t* data = (*shapes)[r].data();
      absl::StatusOr<std::vector<std::vector<int64_t>>> decoded =
          decodeShapes(data, (*shapes)[r].size());
      if (decoded.ok()) fingerprints[r].shapes = *std::move(decoded);
    }
  }

  // Grouped by blob, which also tells apart shapes whose lists could not be
  // fetched (their hashes still differ).
  std::map<Bytes, size_t> group_of;
  std::vector<CallGroup> groups;
  for (int r = 0; r < size; ++r) {
    auto [it, inserted] = group_of.emplace(blobs[r], groups.size());
    if (inserted) {
      groups.push_back({fingerprints[r], getU64(&blobs[r][kShapesHashOffset]), {}});
    }
    groups[it->second].ranks.push_back(r);
  }
  return invalidArgumentError(mismatchMessage(group_name_, std::move(groups)));
}

}  // namespace loom::comm::debug
