// ProcessGroup: the c10d-style front end of a group of ranks. It checks each
// call's arguments, gives it the group's next sequence number, records it in
// the flight recorder, runs the cheap cross-rank checks, and routes it to the
// backend of the tensors' device type (Gloo or MPI for CPU, NCCL or MPI for
// CUDA).
#ifndef LOOM_COMM_PROCESS_GROUP_H_
#define LOOM_COMM_PROCESS_GROUP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/debug_level.h"
#include "comm/store.h"
#include "comm/tensor.h"
#include "comm/work.h"

namespace loom::comm {

// PyTorch's default timeouts: NCCL groups wait 10 minutes, the others 30.
inline constexpr absl::Duration kDefaultNcclTimeout = absl::Minutes(10);
inline constexpr absl::Duration kDefaultTimeout = absl::Minutes(30);

struct ProcessGroupOptions {
  std::string cpu_backend = "gloo";   // "gloo" or "mpi"; "" for none
  std::string cuda_backend = "nccl";  // "nccl" or "mpi"; "" for none
  // Every call without its own timeout waits at most this long. PyTorch's
  // default for a group of these two backends; initProcessGroup("nccl")
  // uses kDefaultNcclTimeout.
  absl::Duration timeout = kDefaultTimeout;
  std::string group_name = "default";
  // Overridden by debugLevel(): setDebugLevel(), LOOM_COMM_CHECKS or
  // TORCH_DISTRIBUTED_DEBUG (comm/debug_level.h).
  CollectiveChecks checks = CollectiveChecks::kCheap;
  // Entries the flight recorder keeps (0 turns it off). On a timeout the
  // group dumps them to LOOM_FLIGHT_RECORDER_DIR (if set) for
  // `comm-flight-analyze`.
  int flight_recorder_entries = 2048;
};

// How a subgroup differs from its parent (c10d new_group's arguments).
struct NewGroupOptions {
  // Unique on the store. Default: "<parent>/<k>" for the parent's k-th
  // newGroup call; with use_local_synchronization "<parent>/[r0,r1,...]".
  std::optional<std::string> name = std::nullopt;
  // A backend string as initProcessGroup's ("gloo", "mpi",
  // "cpu:gloo,cuda:nccl"); unset: the parent's backends.
  std::optional<std::string> backend = std::nullopt;
  // Unset: the parent's timeout.
  std::optional<absl::Duration> timeout = std::nullopt;
  // Unset: the parent's (LOOM_COMM_CHECKS still overrides).
  std::optional<CollectiveChecks> checks = std::nullopt;
  // Only the listed ranks call newGroup and wait for each other (c10d's
  // use_local_synchronization); other ranks may call it and get nullptr at
  // once, without touching the store. Without it every rank of the parent
  // calls it, in the same order.
  bool use_local_synchronization = false;
};

// One send or receive of a batch (batchIsendIrecv).
struct P2POp {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  Tensor tensor;
  int peer = 0;
  int tag = 0;
};

class ProcessGroup {
 public:
  // A group of `size` ranks that meet through `store`; every rank calls this
  // with the same options (checked through the store).
  static absl::StatusOr<std::shared_ptr<ProcessGroup>> create(std::shared_ptr<Store> store,
                                                              int rank, int size,
                                                              ProcessGroupOptions options);
  ~ProcessGroup();

  int rank() const;
  int size() const;
  const std::string& name() const;
  // World ranks of the members, by group rank.
  const std::vector<int>& globalRanks() const;
  absl::Duration timeout() const;
  // The backend that serves each device type ("gloo", "mpi", "nccl"), or ""
  // where the group has none: what ProcessGroupOptions named.
  const std::string& cpuBackend() const;
  const std::string& cudaBackend() const;

  // A subgroup of the listed ranks of this group (c10d new_group). Every
  // rank of this group calls it, with the same list, in the same order as
  // other newGroup calls; ranks outside the list get nullptr. Group rank i
  // is ranks[i]: the order given is kept (c10d sorts the list), so that mesh
  // groups can number ranks by mesh coordinate. `name` defaults to
  // "<this group's name>/<k>" for the k-th newGroup call and must be unique
  // on the store.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> newGroup(std::vector<int> ranks,
                                                         std::optional<std::string> name = {});
  // The same with the subgroup's own backend, timeout or checks, or local
  // synchronization (see NewGroupOptions).
  absl::StatusOr<std::shared_ptr<ProcessGroup>> newGroup(std::vector<int> ranks,
                                                         const NewGroupOptions& options);

  // c10d get_global_rank / get_group_rank: a member's world rank (the rank
  // in the group created with create()), and a world rank's rank in this
  // group. Errors for ranks outside the group or world.
  absl::StatusOr<int> globalRank(int group_rank) const;
  absl::StatusOr<int> groupRank(int global_rank) const;

  using WorkOr = absl::StatusOr<std::shared_ptr<Work>>;

  WorkOr broadcast(Tensor tensor, const BroadcastOptions& options = {});
  WorkOr allReduce(Tensor tensor, const AllReduceOptions& options = {});
  WorkOr reduce(Tensor tensor, const ReduceOptions& options = {});
  // outputs[r] receives rank r's input. Outputs may differ in size (an
  // uneven all_gather, as c10d allows): each must hold exactly what its rank
  // contributes, which only that rank knows (a mismatch fails in the
  // backend or times out); this rank's own must match its input.
  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options = {});
  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options = {});
  WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options = {});
  WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options = {});
  WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                       const ReduceScatterOptions& options = {});
  WorkOr reduceScatterTensor(Tensor output, Tensor input, const ReduceScatterOptions& options = {});
  WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                  const AllToAllOptions& options = {});
  // Empty split lists mean equal splits of dim 0, as in PyTorch.
  WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits = {},
                        std::vector<int64_t> input_splits = {},
                        const AllToAllOptions& options = {});
  WorkOr barrier(const BarrierOptions& options = {});
  WorkOr send(Tensor tensor, int dst, const P2POptions& options = {});
  WorkOr recv(Tensor tensor, int src, const P2POptions& options = {});
  // A receive from whichever rank sends first with this tag (c10d's recv
  // with src=None); the Work's sourceRank() names the sender. Numbered
  // apart from other calls ("recv_any_source #k"). gloo and mpi; nccl
  // refuses it, as PyTorch's NCCL backend does.
  WorkOr recvAnySource(Tensor tensor, const P2POptions& options = {});
  absl::StatusOr<std::vector<std::shared_ptr<Work>>> batchIsendIrecv(std::vector<P2POp> ops);

  // Synchronous forms, torch.distributed's default (async_op=False): each
  // issues the call above and waits for it within the call's timeout. One
  // Status carries argument errors, failed cross-rank checks and engine
  // failures alike; when it is OK the outputs hold the result.
  absl::Status broadcastSync(Tensor tensor, const BroadcastOptions& options = {});
  absl::Status allReduceSync(Tensor tensor, const AllReduceOptions& options = {});
  absl::Status reduceSync(Tensor tensor, const ReduceOptions& options = {});
  absl::Status allGatherSync(std::vector<Tensor> outputs, Tensor input,
                             const AllGatherOptions& options = {});
  absl::Status allGatherIntoTensorSync(Tensor output, Tensor input,
                                       const AllGatherOptions& options = {});
  absl::Status gatherSync(std::vector<Tensor> outputs, Tensor input,
                          const GatherOptions& options = {});
  absl::Status scatterSync(Tensor output, std::vector<Tensor> inputs,
                           const ScatterOptions& options = {});
  absl::Status reduceScatterSync(Tensor output, std::vector<Tensor> inputs,
                                 const ReduceScatterOptions& options = {});
  absl::Status reduceScatterTensorSync(Tensor output, Tensor input,
                                       const ReduceScatterOptions& options = {});
  absl::Status allToAllSync(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                            const AllToAllOptions& options = {});
  absl::Status allToAllSingleSync(Tensor output, Tensor input,
                                  std::vector<int64_t> output_splits = {},
                                  std::vector<int64_t> input_splits = {},
                                  const AllToAllOptions& options = {});
  absl::Status barrierSync(const BarrierOptions& options = {});
  absl::Status sendSync(Tensor tensor, int dst, const P2POptions& options = {});
  absl::Status recvSync(Tensor tensor, int src, const P2POptions& options = {});
  // Returns the sender's rank, as torch.distributed.recv(tensor) does.
  absl::StatusOr<int> recvAnySourceSync(Tensor tensor, const P2POptions& options = {});

  // A barrier that names the ranks that did not arrive within `timeout`
  // (c10d monitored_barrier). By default (wait_all_ranks false, as in
  // PyTorch) it names the first missing rank only; with true, all of them.
  absl::Status monitoredBarrier(std::optional<absl::Duration> timeout = {},
                                bool wait_all_ranks = false);

  // Aborts every backend of the group: outstanding Works fail.
  void abort();

 private:
  class Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_PROCESS_GROUP_H_
