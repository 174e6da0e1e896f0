// Backend: one communication engine (Gloo, MPI, NCCL) serving one process
// group for one device type, as c10d's Backend. The ProcessGroup front end
// validates arguments, numbers the calls and routes each to the backend of
// the tensors' device; a backend runs the call on its engine and completes
// the returned Work.
#ifndef LOOM_COMM_BACKEND_H_
#define LOOM_COMM_BACKEND_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/reduce_op.h"
#include "comm/store.h"
#include "comm/tensor.h"
#include "comm/work.h"

namespace loom::comm {

// Options of each call. An unset timeout means the group's timeout.
struct BroadcastOptions {
  int root = 0;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct AllReduceOptions {
  ReduceOp op = ReduceOp::kSum;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::kSum;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct AllGatherOptions {
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct GatherOptions {
  int root = 0;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct ScatterOptions {
  int root = 0;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::kSum;
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct AllToAllOptions {
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct BarrierOptions {
  std::optional<absl::Duration> timeout = std::nullopt;
};
struct P2POptions {
  int tag = 0;
  std::optional<absl::Duration> timeout = std::nullopt;
};

// What a backend is built from. `store` is already namespaced for this group
// and backend, so a backend may use any keys in it.
struct BackendContext {
  std::shared_ptr<Store> store;
  int rank = 0;
  int size = 0;
  std::string group_name;
  // World ranks of the group's members, by group rank.
  std::vector<int> global_ranks;
  absl::Duration timeout = absl::Minutes(10);
};

// Every call receives validated arguments: tensors of matching dtype and
// size on this backend's device type, roots and peers in range, a reduce op
// the dtype supports. Argument problems the engine alone can detect return a
// Status at once; engine failures complete the Work with an error. A call
// the engine cannot do fails with "backend X does not support Y", never
// silently. Calls are issued in the same order on every rank of the group.
class Backend {
 public:
  explicit Backend(const BackendContext& context)
      : rank_(context.rank), size_(context.size), group_name_(context.group_name) {}
  virtual ~Backend() = default;

  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // "gloo", "mpi", "nccl".
  virtual std::string_view name() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& groupName() const { return group_name_; }

  using WorkOr = absl::StatusOr<std::shared_ptr<Work>>;

  virtual WorkOr broadcast(Tensor tensor, const BroadcastOptions& options,
                           const CollectiveInfo& info);
  virtual WorkOr allReduce(Tensor tensor, const AllReduceOptions& options,
                           const CollectiveInfo& info);
  virtual WorkOr reduce(Tensor tensor, const ReduceOptions& options, const CollectiveInfo& info);
  // outputs[r] receives rank r's input.
  virtual WorkOr allGather(std::vector<Tensor> outputs, Tensor input,
                           const AllGatherOptions& options, const CollectiveInfo& info);
  // `output` holds size() inputs back to back, rank order.
  virtual WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                                     const CollectiveInfo& info);
  // `outputs` is used on the root only (size() tensors); empty elsewhere.
  virtual WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options,
                        const CollectiveInfo& info);
  // `inputs` is used on the root only (size() tensors); empty elsewhere.
  virtual WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options,
                         const CollectiveInfo& info);
  // inputs[r] is this rank's contribution to rank r's output.
  virtual WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                               const ReduceScatterOptions& options, const CollectiveInfo& info);
  // `input` holds size() equal chunks back to back; chunk r goes to rank r.
  virtual WorkOr reduceScatterTensor(Tensor output, Tensor input,
                                     const ReduceScatterOptions& options,
                                     const CollectiveInfo& info);
  // inputs[r] goes to rank r; outputs[r] comes from rank r.
  virtual WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                          const AllToAllOptions& options, const CollectiveInfo& info);
  // Dim-0 rows of `input` split by input_splits go to ranks in order; rows
  // from rank r land in `output` at the offsets given by output_splits. Both
  // split lists have size() entries (already resolved when the caller gave
  // none: equal splits).
  virtual WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                                std::vector<int64_t> input_splits, const AllToAllOptions& options,
                                const CollectiveInfo& info);
  virtual WorkOr barrier(const BarrierOptions& options, const CollectiveInfo& info);
  virtual WorkOr send(Tensor tensor, int dst, const P2POptions& options,
                      const CollectiveInfo& info);
  virtual WorkOr recv(Tensor tensor, int src, const P2POptions& options,
                      const CollectiveInfo& info);
  // A receive from whichever rank sends first with this tag (c10d's
  // recvAnysource); the Work records the sender (Work::sourceRank).
  virtual WorkOr recvAnySource(Tensor tensor, const P2POptions& options,
                               const CollectiveInfo& info);

  // Stops the engine: outstanding Works fail and later calls are refused.
  // Used when a collective times out, as c10d aborts a NCCL communicator.
  virtual void abort() {}

 protected:
  // The "backend X does not support Y" error of a call this backend lacks.
  absl::Status unsupported(const CollectiveInfo& info) const;

 private:
  const int rank_;
  const int size_;
  const std::string group_name_;
};

using BackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<Backend>>(const BackendContext&)>;

// Backends register by name ("gloo", "mpi", "nccl") with the device types
// they serve; ProcessGroupOptions picks one per device type by name.
// Linking //comm:all_backends registers this build's three.
void registerBackend(std::string name, std::vector<Device::Type> devices, BackendFactory factory);
absl::StatusOr<std::unique_ptr<Backend>> createBackend(std::string_view name, Device::Type device,
                                                       const BackendContext& context);
// The registered names, for error messages and --backend flags.
std::vector<std::string> registeredBackends();
// OK when `name` is registered and serves `device`; otherwise the error
// createBackend would give. Nothing is created.
absl::Status checkBackend(std::string_view name, Device::Type device);
// The device types `name` serves, or the unknown-backend error.
absl::StatusOr<std::vector<Device::Type>> backendDevices(std::string_view name);

// The backend per device type a backend string names; "" where the group
// has none (a CUDA call on a "gloo" group fails naming that).
struct BackendChoice {
  std::string cpu = "";
  std::string cuda = "";
};

// Parses a backend string as torch.distributed's: "gloo", "mpi" or "nccl"
// (case-insensitive) for every device type that backend serves, or one per
// device type, "cpu:gloo,cuda:nccl"; empty means that pair. Checked against
// the registered backends, so every rank passing the same string gets the
// same answer without talking to any other.
absl::StatusOr<BackendChoice> parseBackendSpec(std::string_view spec);

}  // namespace loom::comm

#endif  // LOOM_COMM_BACKEND_H_
