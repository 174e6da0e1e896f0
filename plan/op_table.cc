// The op table (op_table.h). Arity ranges and attributes follow the ops'
// definitions in planner/dialect/{nn,dist}/ir/*.td and what the exporter
// writes (operands and results that are plan buffers).
#include "plan/op_table.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_join.h"

namespace loom::plan {
namespace {

using A = AttrId;
using F = OpFamily;

// The placements every nn op carries, per operand and result.
AttrUse operandPlacements() { return {A::kOperandPlacements}; }
AttrUse resultPlacements() { return {A::kResultPlacements}; }

OpInfo compute(std::string_view name, int minOps, int maxOps, int minRes, int maxRes,
               std::initializer_list<AttrUse> own = {}) {
  OpInfo info{.name = name,
              .family = F::kCompute,
              .min_operands = minOps,
              .max_operands = maxOps,
              .min_results = minRes,
              .max_results = maxRes,
              .attrs = {}};
  info.attrs = {operandPlacements(), resultPlacements()};
  info.attrs.insert(info.attrs.end(), own.begin(), own.end());
  return info;
}

// `info` allowed in the optimizer phase too.
OpInfo anyPhase(OpInfo info) {
  info.phases = PhaseSet::kAny;
  return info;
}

// A collective, blocking or async (`_start`), with the attributes of its kind.
OpInfo collective(std::string_view name, CollectiveKind kind, bool async) {
  OpInfo info{.name = name,
              .family = F::kCollective,
              .min_operands = 1,
              .max_operands = 1,
              .min_results = 1,
              .max_results = 1,
              .stream = Stream::kComm,
              .phases = PhaseSet::kAny,
              .collective = kind,
              .async_start = async,
              .attrs = {}};
  info.attrs = {
      {A::kMeshAxes, true}, {A::kWireType, true}, {A::kGroupSize, true}, {A::kBytes, true}};
  switch (kind) {
    case CollectiveKind::kAllGather:
      info.attrs.insert(info.attrs.end(), {{A::kGatherDim, true}, {A::kPadded}});
      break;
    case CollectiveKind::kReduceScatter:
      info.attrs.insert(
          info.attrs.end(),
          {{A::kScatterDim, true}, {A::kPadded}, {A::kReduction, true}, {A::kAccumType}});
      break;
    case CollectiveKind::kAllReduce:
      info.attrs.insert(info.attrs.end(), {{A::kReduction, true}, {A::kAccumType}});
      break;
    case CollectiveKind::kAllToAll:
      info.attrs.insert(info.attrs.end(), {{A::kSplitDim, true}, {A::kConcatDim, true}});
      break;
    case CollectiveKind::kNone:
      break;
  }
  if (async) info.attrs.push_back({A::kAsyncHandle, true});
  return info;
}

// A send or receive to one peer along one mesh axis, blocking or async: a
// send reads its operand (its start defines the handle's buffer, the wait
// the sent tensor back), a receive defines its result. Model blocks move
// activations and their gradients; the optimizer block a tied parameter's
// gradient between the stages that hold it.
OpInfo pointToPoint(std::string_view name, PointToPoint direction, bool async) {
  const bool send = direction == PointToPoint::kSend;
  OpInfo info{.name = name,
              .family = F::kPointToPoint,
              .min_operands = send ? 1 : 0,
              .max_operands = send ? 1 : 0,
              .min_results = send && !async ? 0 : 1,
              .max_results = send && !async ? 0 : 1,
              .stream = Stream::kComm,
              .phases = PhaseSet::kAny,
              .p2p = direction,
              .async_start = async,
              .attrs = {}};
  // The placements (optional) say how the moved tensor is laid out on the
  // other axes, as the planner gave it.
  info.attrs = {{A::kMeshAxes, true}, {A::kPeer, true},      {A::kTag, true},
                {A::kBytes, true},    operandPlacements(), resultPlacements()};
  if (async) info.attrs.push_back({A::kAsyncHandle, true});
  return info;
}

// A copy between device and host memory on the copy stream, always async:
// to the host into a new host buffer, or into an existing device buffer
// (operands: the host source and the device buffer, which it updates in
// place, converting to its type).
OpInfo copy(std::string_view name, bool into) {
  return {.name = name,
          .family = F::kCopy,
          .min_operands = into ? 2 : 1,
          .max_operands = into ? 2 : 1,
          .min_results = 1,
          .max_results = 1,
          .stream = Stream::kCopy,
          .phases = PhaseSet::kAny,
          .async_start = true,
          .in_place = into,
          .attrs = {{A::kBytes, true}, {A::kAsyncHandle, true}}};
}

std::vector<OpInfo> makeTable() {
  using C = CollectiveKind;
  const AttrUse epsilon{A::kEpsilon, true};
  const AttrUse scale{A::kScale, true};
  const AttrUse vocab{A::kVocab, true};
  std::vector<OpInfo> table = {
      // Forward compute.
      compute("nn.embedding", 2, 2, 1, 1),
      compute("nn.linear", 2, 3, 1, 1),
      compute("nn.bias_add", 2, 2, 1, 1),
      compute("nn.matmul", 2, 2, 1, 1, {{A::kTransposeLhs}, {A::kTransposeRhs}}),
      compute("nn.rms_norm", 2, 2, 1, 1, {epsilon}),
      compute("nn.layer_norm", 3, 3, 1, 1, {epsilon}),
      compute("nn.rope", 1, 1, 1, 1,
              {{A::kTheta, true},
               {A::kInverse},
               {A::kScalingFactor},
               {A::kLowFreqFactor},
               {A::kHighFreqFactor},
               {A::kOriginalMaxPositions}}),
      compute("nn.attention", 3, 3, 1, 1),
      compute("nn.silu", 1, 1, 1, 1),
      compute("nn.gelu", 1, 1, 1, 1),
      // Also the optimizer phase's sum of a tied parameter's gradients
      // across the stages that hold it.
      anyPhase(compute("nn.add", 2, 2, 1, 1)),
      compute("nn.mul", 2, 2, 1, 1),
      compute("nn.softmax", 1, 1, 1, 1),
      compute("nn.reshape", 1, 1, 1, 1),
      compute("nn.transpose", 1, 1, 1, 1, {{A::kPermutation, true}}),
      compute("nn.cross_entropy", 2, 2, 1, 1),
      compute("nn.vocab_max", 1, 1, 1, 1, {vocab}),
      compute("nn.vocab_stats", 3, 3, 1, 1, {vocab}),
      compute("nn.vocab_cross_entropy", 1, 1, 1, 1),
      // Backward compute.
      compute("nn.embedding_grad", 2, 2, 1, 1),
      compute("nn.reduce_sum", 1, 1, 1, 1, {{A::kDims, true}}),
      compute("nn.rms_norm_grad", 3, 3, 2, 2, {epsilon}),
      compute("nn.layer_norm_grad", 3, 3, 3, 3, {epsilon}),
      compute("nn.attention_grad", 4, 4, 3, 3),
      compute("nn.softmax_grad", 2, 2, 1, 1),
      compute("nn.silu_grad", 2, 2, 1, 1),
      compute("nn.gelu_grad", 2, 2, 1, 1),
      compute("nn.cross_entropy_grad", 3, 3, 1, 1, {scale}),
      compute("nn.vocab_cross_entropy_grad", 5, 5, 1, 1, {scale, vocab}),
      // Collectives, blocking and async, and the wait that ends an async one.
      collective("dist.all_gather", C::kAllGather, false),
      collective("dist.all_gather_start", C::kAllGather, true),
      collective("dist.reduce_scatter", C::kReduceScatter, false),
      collective("dist.reduce_scatter_start", C::kReduceScatter, true),
      collective("dist.all_reduce", C::kAllReduce, false),
      collective("dist.all_reduce_start", C::kAllReduce, true),
      collective("dist.all_to_all", C::kAllToAll, false),
      collective("dist.all_to_all_start", C::kAllToAll, true),
      // Point-to-point between pipeline stages.
      pointToPoint("dist.send", PointToPoint::kSend, false),
      pointToPoint("dist.send_start", PointToPoint::kSend, true),
      pointToPoint("dist.recv", PointToPoint::kRecv, false),
      pointToPoint("dist.recv_start", PointToPoint::kRecv, true),
      // Offload: gradients to the host, updated parameters back.
      copy("dist.copy_to_host_start", /*into=*/false),
      copy("dist.copy_into_device_start", /*into=*/true),
      {.name = "dist.wait",
       .family = F::kWait,
       .min_operands = 1,
       .max_operands = 1,
       .min_results = 1,
       .max_results = 1,
       .phases = PhaseSet::kAny,
       .attrs = {{A::kAsyncHandle, true}}},
      // Buffers.
      {.name = "dist.bucket",
       .family = F::kBuffer,
       .min_operands = 1,
       .max_operands = -1,
       .min_results = 1,
       .max_results = 1,
       .phases = PhaseSet::kAny,
       .attrs = {{A::kOffsets, true}, {A::kChunks}, {A::kSplitDims}, {A::kPadded}}},
      // Result placements: set where the shards are not all the flat
      // buffer's (gradient shards re-packed for different all-reduces).
      {.name = "dist.unbucket",
       .family = F::kBuffer,
       .min_operands = 1,
       .max_operands = 1,
       .min_results = 1,
       .max_results = -1,
       .phases = PhaseSet::kAny,
       .attrs =
           {{A::kOffsets, true}, {A::kChunks}, {A::kSplitDims}, {A::kPadded}, resultPlacements()}},
      {.name = "dist.slice",
       .family = F::kBuffer,
       .min_operands = 1,
       .max_operands = 1,
       .min_results = 1,
       .max_results = 1,
       .phases = PhaseSet::kAny,
       .attrs = {{A::kMeshAxes, true}, {A::kSliceDim, true}, {A::kPadded}}},
      // A gradient summed over the micro-steps: defined by the first,
      // added to in place by the others.
      {.name = "dist.accumulate",
       .family = F::kBuffer,
       .min_operands = 1,
       .max_operands = 1,
       .min_results = 1,
       .max_results = 1,
       .phases = PhaseSet::kModel,
       .accumulates = true,
       .attrs = {}},
      {.name = "dist.free",
       .family = F::kBuffer,
       .min_operands = 1,
       .max_operands = 1,
       .min_results = 0,
       .max_results = 0,
       .phases = PhaseSet::kAny,
       .ends_buffer = true,
       .attrs = {}},
      // The optimizer: param, grad, exp_avg, exp_avg_sq and, for a non-f32
      // param, its f32 master copy, all but the grad updated in place.
      {.name = "dist.optimizer_step",
       .family = F::kOptimizer,
       .min_operands = 4,
       .max_operands = 5,
       .min_results = 3,
       .max_results = 4,
       .phases = PhaseSet::kOptimizer,
       .in_place = true,
       .attrs = {{A::kLr, true},
                 {A::kBeta1, true},
                 {A::kBeta2, true},
                 {A::kEps, true},
                 {A::kWeightDecay, true}}},
  };
  return table;
}

}  // namespace

const char* streamName(Stream stream) {
  switch (stream) {
    case Stream::kComm:
      return "comm";
    case Stream::kCopy:
      return "copy";
    case Stream::kCompute:
      return "compute";
  }
  return "?";
}

const char* collectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kNone:
      return "";
  }
  return "";
}

const char* attrName(AttrId id) {
  switch (id) {
    case A::kEpsilon:
      return "epsilon";
    case A::kTheta:
      return "theta";
    case A::kInverse:
      return "inverse";
    case A::kScalingFactor:
      return "scaling_factor";
    case A::kLowFreqFactor:
      return "low_freq_factor";
    case A::kHighFreqFactor:
      return "high_freq_factor";
    case A::kOriginalMaxPositions:
      return "original_max_positions";
    case A::kTransposeLhs:
      return "transpose_lhs";
    case A::kTransposeRhs:
      return "transpose_rhs";
    case A::kScale:
      return "scale";
    case A::kVocab:
      return "vocab";
    case A::kDims:
      return "dims";
    case A::kPermutation:
      return "permutation";
    case A::kOperandPlacements:
      return "dist.operand_placements";
    case A::kResultPlacements:
      return "dist.result_placements";
    case A::kMeshAxes:
      return "mesh_axes";
    case A::kWireType:
      return "wire_type";
    case A::kAccumType:
      return "accum_type";
    case A::kReduction:
      return "reduction";
    case A::kPadded:
      return "padded";
    case A::kGatherDim:
      return "gather_dim";
    case A::kScatterDim:
      return "scatter_dim";
    case A::kSplitDim:
      return "split_dim";
    case A::kConcatDim:
      return "concat_dim";
    case A::kGroupSize:
      return "group_size";
    case A::kBytes:
      return "bytes";
    case A::kAsyncHandle:
      return "async_handle";
    case A::kChunks:
      return "chunks";
    case A::kOffsets:
      return "offsets";
    case A::kSplitDims:
      return "split_dims";
    case A::kSliceDim:
      return "slice_dim";
    case A::kPeer:
      return "peer";
    case A::kTag:
      return "tag";
    case A::kLr:
      return "lr";
    case A::kBeta1:
      return "beta1";
    case A::kBeta2:
      return "beta2";
    case A::kEps:
      return "eps";
    case A::kWeightDecay:
      return "weight_decay";
  }
  return "?";
}

const AttrUse* OpInfo::findAttr(AttrId id) const {
  for (const AttrUse& use : attrs) {
    if (use.id == id) return &use;
  }
  return nullptr;
}

const std::vector<OpInfo>& opTable() {
  static const std::vector<OpInfo>* const kTable = new std::vector<OpInfo>(makeTable());
  return *kTable;
}

const OpInfo* findOp(std::string_view name) {
  for (const OpInfo& info : opTable()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string_view opNames() {
  static const std::string* const kNames = [] {
    std::vector<std::string> names;
    for (const OpInfo& info : opTable()) names.emplace_back(info.name);
    std::sort(names.begin(), names.end());
    return new std::string(absl::StrJoin(names, ", "));
  }();
  return *kNames;
}

}  // namespace loom::plan
