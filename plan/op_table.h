// The ops a plan instruction may name, one row each: the family that
// executes it, its operand and result counts, its stream, the phases it may
// appear in, the collective it performs, and the attributes it takes (with
// the ones it must have). The reader checks every instruction against its
// row, the exporter writes only what the row allows, and the executor binds
// one binder per row (docs/plan_library.md). The planner's completeness
// test (tests/planner/export:op_table_completeness_test) holds the table
// against the nn and dist dialects.
#ifndef LOOM_PLAN_OP_TABLE_H_
#define LOOM_PLAN_OP_TABLE_H_

#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace loom::plan {

enum class OpFamily {
  kCompute,       // nn.*: a kernel on local shards
  kCollective,    // dist.all_gather, ...: a collective over mesh axes
  kWait,          // dist.wait: completes an async collective
  kBuffer,        // dist.bucket, dist.unbucket, dist.slice, dist.free
  kOptimizer,     // dist.optimizer_step: updates a parameter in place
  kPointToPoint,  // dist.send, dist.recv (and _start): one peer along one axis
  kCopy,          // dist.copy_to_host_start, ...: between device and host memory
};

// Which way a point-to-point op moves its tensor.
enum class PointToPoint { kNone, kSend, kRecv };

// Copies between device and host memory run on their own stream, beside
// compute and communication.
enum class Stream { kCompute, kComm, kCopy };
const char* streamName(Stream stream);

enum class CollectiveKind { kNone, kAllGather, kReduceScatter, kAllReduce, kAllToAll };
// "all_gather", "reduce_scatter", "all_reduce", "all_to_all" ("" for kNone).
const char* collectiveKindName(CollectiveKind kind);

// Every attribute an instruction can carry; its JSON key is attrName(id).
enum class AttrId {
  kEpsilon,
  kTheta,
  kInverse,
  kScalingFactor,
  kLowFreqFactor,
  kHighFreqFactor,
  kOriginalMaxPositions,
  kTransposeLhs,
  kTransposeRhs,
  kScale,
  kVocab,
  kDims,
  kPermutation,
  kOperandPlacements,
  kResultPlacements,
  kMeshAxes,
  kWireType,
  kAccumType,
  kReduction,
  kPadded,
  kGatherDim,
  kScatterDim,
  kSplitDim,
  kConcatDim,
  kGroupSize,
  kBytes,
  kAsyncHandle,
  kChunks,
  kOffsets,
  kSplitDims,
  kSliceDim,
  kPeer,
  kTag,
  kLr,
  kBeta1,
  kBeta2,
  kEps,
  kWeightDecay,
};
inline constexpr int kNumAttrs = static_cast<int>(AttrId::kWeightDecay) + 1;
// "epsilon", "dist.operand_placements", "mesh_axes", ...
const char* attrName(AttrId id);

// One attribute an op takes.
struct AttrUse {
  AttrId id;
  bool required = false;
};

// The phases an op may appear in.
enum class PhaseSet { kModel, kOptimizer, kAny };

struct OpInfo {
  std::string_view name;
  OpFamily family;
  int min_operands;
  int max_operands;  // -1: any number from min_operands up
  int min_results;
  int max_results;  // -1: any number from min_results up
  Stream stream = Stream::kCompute;
  PhaseSet phases = PhaseSet::kModel;
  CollectiveKind collective = CollectiveKind::kNone;
  PointToPoint p2p = PointToPoint::kNone;
  bool async_start = false;  // *_start: names a handle that one dist.wait ends
  // Whether the results are the operands updated in place (defined again);
  // an async start's in-place result is what its dist.wait yields again.
  bool in_place = false;
  // dist.free: ends its operand's lifetime without reading it.
  bool ends_buffer = false;
  // dist.accumulate: its result is a sum over the micro-steps, carried from
  // one to the next.
  bool accumulates = false;
  std::vector<AttrUse> attrs;
  const AttrUse* findAttr(AttrId id) const;
};

// Every op a plan may hold, in no particular order.
const std::vector<OpInfo>& opTable();

// The row of `name`, or null.
const OpInfo* findOp(std::string_view name);

// "nn.add, nn.attention, ...": every name, sorted, for messages.
std::string_view opNames();

}  // namespace loom::plan

#endif  // LOOM_PLAN_OP_TABLE_H_
