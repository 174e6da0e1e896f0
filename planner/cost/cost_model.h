// The cost model's pricing rules, without MLIR: how long one compute op
// takes (FLOPs and bytes against the device's peak with a per-op-kind
// efficiency, or a machine profile's measured GEMM rate), how long one
// collective takes (alpha-beta per link class with the ring's bus factor
// already in the bytes per rank), and how long the optimizer streams its
// states. cost::pricePlan prices every plan with it: the exported plan's
// predicted timeline and the mesh search's candidates. The rules and their sources are in
// docs/planner_cost.md.
#ifndef LOOM_PLANNER_COST_COST_MODEL_H_
#define LOOM_PLANNER_COST_COST_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "mesh/topology.h"
#include "planner/cost/compute_cost.h"
#include "planner/cost/machine_profile.h"

namespace loom::planner::cost {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll, kBroadcast };

// "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast".
std::string_view collectiveKindName(CollectiveKind kind);

// The ranks of one collective's group as the topology places them.
struct GroupShape {
  int64_t size = 1;
  // Distinct hosts the group spans (1: it stays inside one host).
  int64_t hosts = 1;
};

// The fraction of the datasheet peak each op class reaches. The defaults
// are what eager PyTorch reaches on an H100 in published runs
// (docs/planner_cost.md explains each figure); a machine profile's
// measured GEMM rates replace gemm x peak.
struct Efficiency {
  // Large GEMMs (min(m, n, k) >= 2048) reach gemm x peak; medium ones
  // gemm x medium_ratio, small ones gemm x small_ratio.
  double gemm = 0.5;
  double medium_ratio = 0.85;
  double small_ratio = 0.5;
  // Flash attention reaches attention_ratio of the large-GEMM rate.
  double attention_ratio = 0.7;
  // Memory-bound kernels reach this fraction of the memory bandwidth.
  double memory = 0.7;
};

class CostModel {
 public:
  // Prices on `topology` (whose device gives the peaks and bandwidth) with
  // `efficiency`; a `profile` (optional, borrowed: it must outlive the
  // model) replaces the GEMM rates, the memory figures and the collective
  // alpha-beta it measured. Fails when an efficiency is not in (0, 1] or
  // the profile was measured on another device than the topology's.
  static absl::StatusOr<CostModel> create(const mesh::Topology& topology,
                                          const Efficiency& efficiency = {},
                                          const MachineProfile* profile = nullptr);

  // Seconds of one compute op: max(FLOPs / rate, bytes / (bandwidth x
  // memory efficiency)); 0 for kFree.
  double computeSeconds(const ComputeCost& cost) const;

  // Seconds of one collective of `kind` over `group` moving `bytes_per_rank`
  // (the per-rank bytes of comm_volume.h: the bus factor is in them). 0 for
  // a group of one.
  double collectiveSeconds(CollectiveKind kind, const GroupShape& group,
                           double bytes_per_rank) const;

  // Seconds of one point-to-point transfer of `bytes` between two ranks of
  // `group` (a pipeline axis): one hop, over the inter-host link when the
  // group spans hosts (adjacent stages then sit on different hosts), else
  // the intra-host one. Waiting for the peer is the schedule's, not this.
  double pointToPointSeconds(const GroupShape& group, double bytes) const;

  // Seconds to stream `bytes` through memory (the optimizer step).
  double streamSeconds(double bytes) const;

  // Offload (docs/planner_offload.md): seconds of one copy of `bytes`
  // between device and host memory, on the topology's host link (latency
  // plus bytes over its per-direction bandwidth); and seconds for the host
  // to stream `bytes` through its memory (AdamW on offloaded states), at
  // the memory-bound efficiency of its share of the host's bandwidth.
  double hostCopySeconds(double bytes) const;
  double hostStreamSeconds(double bytes) const;

  // The dense peak FLOP/s of `dtype` (bf16 and f16: the tensor-core peak;
  // f32: the fp32 peak), what MFU divides by.
  double peakFlops(Dtype dtype) const;

  // The group of ranks along `axes` of `mesh` that holds rank 0 (every
  // group along the same axes is alike on a homogeneous topology).
  absl::StatusOr<GroupShape> groupOf(const mesh::DeviceMesh& mesh,
                                     const std::vector<std::string>& axes) const;

  const mesh::Topology& topology() const { return topology_; }
  const Efficiency& efficiency() const { return efficiency_; }
  const MachineProfile* profile() const { return profile_; }
  // Device memory in bytes (the profile's when given).
  int64_t memoryBytes() const { return memory_bytes_; }
  // "nccl" on GPUs, "gloo" on cpu: the backend whose profile entries win.
  const std::string& backend() const { return backend_; }

 private:
  CostModel(const mesh::Topology& topology, const Efficiency& efficiency,
            const MachineProfile* profile);

  double gemmRate(Dtype dtype, int64_t m, int64_t n, int64_t k) const;

  mesh::Topology topology_;
  Efficiency efficiency_;
  const MachineProfile* profile_ = nullptr;
  double memory_bandwidth_ = 0;
  int64_t memory_bytes_ = 0;
  std::string backend_;
};

// Ring steps of a collective over `size` ranks: g - 1, 2(g - 1) for
// all_reduce; and of those, the steps that cross hosts when the group spans
// `hosts` hosts (h - 1, 2(h - 1) for all_reduce).
int64_t ringSteps(CollectiveKind kind, int64_t size);
int64_t interHostSteps(CollectiveKind kind, int64_t hosts);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_COST_MODEL_H_
