// The ProcessGroup front end: argument checks, sequence numbers, routing to
// the backend of each device type, subgroups and the store-based monitored
// barrier.
#include "comm/process_group.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "comm/debug/checked_issuer.h"
#include "comm/debug/fingerprint.h"
#include "comm/debug/flight_recorder.h"
#include "comm/errors.h"
#include "comm/prefix_store.h"
#include "comm/reduce_op.h"

namespace loom::comm {
namespace {

absl::Status withContext(const absl::Status& status, const std::string& prefix) {
  return makeError(errorKind(status), status.code(), absl::StrCat(prefix, status.message()));
}

// What every rank of a group must agree on when creating it.
std::string describeOptions(const ProcessGroupOptions& options, int size) {
  return absl::StrCat("size=", size, " cpu_backend=", options.cpu_backend,
                      " cuda_backend=", options.cuda_backend,
                      " timeout=", absl::FormatDuration(options.timeout),
                      " checks=", std::string(checksName(options.checks)));
}

// One call as the front end sees it, before it has a sequence number.
struct Call {
  std::string op = {};
  // The device whose backend runs the call.
  Device device = {};
  DType dtype = DType::kFloat32;
  // Every tensor's shape, for the flight recorder.
  std::vector<std::vector<int64_t>> shapes = {};
  // send/recv: the other rank; -1 for collectives.
  int peer = -1;
  bool is_send = false;
  // What the cross-rank check compares (collectives only): the elements
  // each rank contributes or receives (0 where that legitimately differs
  // between ranks, as in all_to_all), the root, the reduce op, and the
  // shapes of the tensors every rank passes alike.
  int64_t numel = 0;
  int root = -1;
  std::optional<ReduceOp> reduce_op = std::nullopt;
  std::vector<std::vector<int64_t>> common_shapes = {};
  // What the Work's result() returns: the tensors the call writes.
  std::vector<Tensor> outputs = {};
  // A receive from any source: point-to-point, but with no peer.
  bool any_source = false;
};

// Records a call's end in the flight recorder and, when it timed out, dumps
// the recorder for comm-flight-analyze. Holds no reference to the group, so
// it may run after the group is gone.
void recordEnd(const std::shared_ptr<debug::FlightRecorder>& recorder, uint64_t id,
               const absl::Status& status, const std::string& group, int rank) {
  if (recorder == nullptr) return;
  recorder->recordFinished(id, status);
  if (errorKind(status) != ErrorKind::kTimeout) return;
  const char* dir = std::getenv("LOOM_FLIGHT_RECORDER_DIR");
  if (dir == nullptr || *dir == '\0') return;
  const std::string path = absl::StrCat(dir, "/", debug::flightDumpFileName(group, rank));
  if (absl::Status dumped = recorder->dump(path); !dumped.ok()) {
    logMessage(LogLevel::kWarning, absl::StrCat("could not dump the flight recorder of group ",
                                                group, " to ", path, ": ", dumped.message()));
    return;
  }
  logMessage(LogLevel::kInfo, absl::StrCat("a call of group ", group, " (rank ", rank,
                                           ") timed out; its flight recorder is in ", path));
}

}  // namespace

class ProcessGroup::Impl {
 public:
  ProcessGroupOptions options;
  int rank = 0;
  int size = 0;
  std::vector<int> global_ranks;
  // The store groups are created on; this group's keys live under `store`.
  std::shared_ptr<Store> base_store;
  std::shared_ptr<Store> store;

  absl::Mutex mu;
  uint64_t next_seq ABSL_GUARDED_BY(mu) = 1;
  // send/recv count separately per peer and direction, so that send #k
  // from a to b is the call that meets recv #k on b from a.
  std::vector<uint64_t> sends ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> recvs ABSL_GUARDED_BY(mu);
  uint64_t new_groups ABSL_GUARDED_BY(mu) = 0;
  uint64_t any_source_recvs ABSL_GUARDED_BY(mu) = 0;
  // Declared before the backends, which complete Works (and so record
  // into it) until they are destroyed.
  std::shared_ptr<debug::FlightRecorder> recorder;
  std::unique_ptr<debug::FingerprintChecker> checker;
  std::unique_ptr<Backend> cuda_backend ABSL_GUARDED_BY(mu);
  std::unique_ptr<Backend> cpu_backend;
  // Runs the checks of CPU collectives off the caller's thread. Declared
  // last: destroyed first, while the checker and backends it feeds exist.
  std::unique_ptr<debug::CheckedIssuer> issuer;

  static absl::StatusOr<std::shared_ptr<ProcessGroup>> create(std::shared_ptr<Store> base_store,
                                                              int rank, int size,
                                                              ProcessGroupOptions options,
                                                              std::vector<int> global_ranks);

  // "all_gather in group tp (rank 1 of 4): ", the start of argument errors.
  std::string where(const std::string& op) const {
    return absl::StrCat(op, " in group ", options.group_name, " (rank ", rank, " of ", size, "): ");
  }

  absl::Status checkRank(const std::string& op, const std::string& what, int value) const {
    if (value >= 0 && value < size) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(where(op), what, " is ", value,
                                             " but the group has ranks 0 to ", size - 1,
                                             "; pass a rank of this group (not a global rank)"));
  }

  absl::Status checkPeer(const std::string& op, const std::string& what, int peer) const {
    if (absl::Status status = checkRank(op, what, peer); !status.ok()) return status;
    if (peer != rank) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(where(op), what, " is this rank (", rank,
                                             "); send to and receive from other ranks only"));
  }

  absl::Status checkReduce(const std::string& op, ReduceOp reduce_op, DType dtype) const {
    absl::Status status = checkReduceOpSupports(reduce_op, dtype);
    return status.ok() ? status : withContext(status, where(op));
  }

  // The tensor list of gather (outputs) or scatter (inputs): one tensor like
  // `like` per rank on the root, none elsewhere.
  absl::Status checkRootList(const std::string& op, const std::vector<Tensor>& list,
                             const std::string& what, const Tensor& like, int root) const {
    if (rank == root) {
      if (absl::Status s = checkCount(op, what + "s", list.size()); !s.ok()) return s;
      return checkEach(op, list, what, like.dtype(), like.numel(), like.device());
    }
    if (list.empty()) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(where(op), what, "s has ", list.size(),
                                             " tensors on a rank that is not the root (", root,
                                             "); pass none there"));
  }

  absl::Status checkCount(const std::string& op, const std::string& what, size_t count) const {
    if (count == static_cast<size_t>(size)) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(where(op), what, " has ", count,
                                             " tensors but the group has ", size,
                                             " ranks; pass one tensor per rank"));
  }

  absl::Status checkOne(const std::string& op, const Tensor& tensor, const std::string& what,
                        DType dtype, int64_t numel, Device device) const {
    absl::Status status = checkTensor(tensor, what, dtype, numel, device);
    return status.ok() ? status : withContext(status, where(op));
  }

  absl::Status checkEach(const std::string& op, const std::vector<Tensor>& tensors,
                         const std::string& what, DType dtype, int64_t numel, Device device) const {
    for (size_t r = 0; r < tensors.size(); ++r) {
      if (absl::Status status =
              checkOne(op, tensors[r], absl::StrCat(what, " ", r), dtype, numel, device);
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

  // Outputs must be writable: a view of const data is an input only.
  absl::Status checkWritable(const std::string& op, const Tensor& tensor,
                             const std::string& what) const {
    if (tensor.writable()) return absl::OkStatus();
    return invalidArgumentError(absl::StrCat(where(op), what, " ", tensor.toString(),
                                             " is a read-only view (of const data) but ", op,
                                             " writes into it; pass a view of writable memory"));
  }

  absl::Status checkWritableEach(const std::string& op, const std::vector<Tensor>& tensors,
                                 const std::string& what) const {
    for (size_t r = 0; r < tensors.size(); ++r) {
      if (absl::Status s = checkWritable(op, tensors[r], absl::StrCat(what, " ", r)); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Point-to-point tags, as c10d's, are non-negative.
  absl::Status checkTag(const std::string& op, int64_t tag) const {
    if (tag >= 0) return absl::OkStatus();
    return invalidArgumentError(
        absl::StrCat(where(op), "tag is ", tag, "; tags must be non-negative"));
  }

  absl::Status checkSelf(const std::string& op, const Tensor& tensor,
                         const std::string& what) const {
    return checkOne(op, tensor, what, tensor.dtype(), tensor.numel(), tensor.device());
  }

  absl::StatusOr<Backend*> backendFor(const Device& device, const std::string& op) {
    if (!device.isCuda()) {
      if (cpu_backend == nullptr) {
        return invalidArgumentError(absl::StrCat(where(op), "the group has no CPU backend (",
                                                 "cpu_backend is empty); pass CUDA tensors"));
      }
      return cpu_backend.get();
    }
    // Created on first use: every rank makes the same calls in the same
    // order, so every rank reaches this point at the same call.
    if (options.cuda_backend.empty()) {
      return invalidArgumentError(absl::StrCat(where(op), "the group has no CUDA backend (",
                                               "cuda_backend is empty); pass CPU tensors"));
    }
    absl::MutexLock lock(&mu);
    if (cuda_backend == nullptr) {
      absl::StatusOr<std::unique_ptr<Backend>> backend =
          createBackend(options.cuda_backend, Device::Type::kCuda, backendContext("cuda"));
      if (!backend.ok()) return withContext(backend.status(), where(op));
      cuda_backend = *std::move(backend);
    }
    return cuda_backend.get();
  }

  BackendContext backendContext(const std::string& purpose) const {
    return BackendContext{
        .store = std::make_shared<PrefixStore>(absl::StrCat("backend/", purpose), store),
        .rank = rank,
        .size = size,
        .group_name = options.group_name,
        .global_ranks = global_ranks,
        .timeout = options.timeout};
  }

  CollectiveInfo nextInfo(const Call& call) {
    CollectiveInfo info{.group = options.group_name,
                        .rank = rank,
                        .group_size = size,
                        .op = call.op,
                        .peer = call.peer};
    absl::MutexLock lock(&mu);
    if (call.any_source) {
      info.seq = ++any_source_recvs;
    } else if (call.peer < 0) {
      info.seq = next_seq++;
    } else {
      info.seq = ++(call.is_send ? sends : recvs)[call.peer];
    }
    return info;
  }

  absl::Status monitoredBarrier(const CollectiveInfo& info, absl::Duration limit,
                                bool wait_all_ranks);

  uint64_t recordStart(const CollectiveInfo& info, const Call& call) {
    return recorder == nullptr ? 0 : recorder->recordScheduled(info, call.dtype, call.shapes);
  }

  void recordEnd(uint64_t id, const absl::Status& status) {
    comm::recordEnd(recorder, id, status, options.group_name, rank);
  }

  // Records the call's end when `work` completes. The callback holds no
  // reference to the group, which may be gone by then.
  void recordEndOnCompletion(Work& work, uint64_t id) {
    if (recorder == nullptr) return;
    work.onCompletion([recorder = recorder, id, group = options.group_name,
                       rank = rank](const absl::Status& status) {
      comm::recordEnd(recorder, id, status, group, rank);
    });
  }

  // Numbers the call, records it, checks it against the other ranks'
  // (collectives, when checks are on) and hands it to the backend of its
  // device. `run` may run later, on the issuer's thread, so it holds its
  // arguments by value.
  WorkOr issue(const Call& call, std::function<WorkOr(Backend&, const CollectiveInfo&)> run) {
    absl::StatusOr<Backend*> backend = backendFor(call.device, call.op);
    if (!backend.ok()) return backend.status();
    const CollectiveInfo info = nextInfo(call);
    const uint64_t id = recordStart(info, call);
    if (checker != nullptr && call.peer < 0 && !call.any_source) {
      debug::CollectiveFingerprint fingerprint{.seq = info.seq,
                                               .op = call.op,
                                               .dtype = call.dtype,
                                               .numel = call.numel,
                                               .root = call.root,
                                               .reduce_op = call.reduce_op,
                                               .shapes = {}};
      if (options.checks == CollectiveChecks::kDetail) fingerprint.shapes = call.common_shapes;
      // CUDA calls stay on the caller's thread, which owns their stream
      // order; CPU calls are checked and issued by the issuer.
      if (issuer != nullptr && !call.device.isCuda()) {
        auto work = std::make_shared<debug::CheckedWork>(info, options.timeout);
        work->setOutputs(call.outputs);
        recordEndOnCompletion(*work, id);
        issuer->submit(
            std::move(fingerprint), work,
            [run = std::move(run), backend = *backend, info] { return run(*backend, info); });
        return work;
      }
      if (absl::Status status = checker->check(fingerprint); !status.ok()) {
        // The checker's verdict reads the same on every rank; say which
        // rank's log this is.
        status = withContext(status, absl::StrCat("rank ", rank, " of ", size, ": "));
        recordEnd(id, status);
        return status;
      }
    }
    WorkOr work = run(**backend, info);
    if (!work.ok()) {
      recordEnd(id, work.status());
      return work;
    }
    (*work)->setOutputs(call.outputs);
    recordEndOnCompletion(**work, id);
    return work;
  }
};

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Impl::create(
    std::shared_ptr<Store> base_store, int rank, int size, ProcessGroupOptions options,
    std::vector<int> global_ranks) {
  const std::string who =
      absl::StrCat("creating group ", options.group_name, " (rank ", rank, " of ", size, "): ");
  if (base_store == nullptr) return invalidArgumentError(absl::StrCat(who, "the store is null"));
  if (size < 1 || rank < 0 || rank >= size) {
    return invalidArgumentError(absl::StrCat(
        who, "rank must be in [0, size) and size at least 1; got rank ", rank, ", size ", size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return invalidArgumentError(
        absl::StrCat(who, "timeout must be positive; got ", absl::FormatDuration(options.timeout)));
  }
  absl::StatusOr<std::optional<CollectiveChecks>> level = debugLevel();
  if (!level.ok()) return withContext(level.status(), who);
  options.checks = level->value_or(options.checks);
  // Backend names are checked before the store is touched, so that a
  // mistyped name fails on every rank with the same words (rather than on
  // the first rank, and as a vanished store on the others once it exits).
  for (const auto& [name, device] : {std::pair{options.cpu_backend, Device::Type::kCpu},
                                     std::pair{options.cuda_backend, Device::Type::kCuda}}) {
    if (name.empty()) continue;
    if (absl::Status s = checkBackend(name, device); !s.ok()) return withContext(s, who);
  }

  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->rank = rank;
  impl->size = size;
  impl->global_ranks = std::move(global_ranks);
  impl->base_store = base_store;
  impl->store =
      std::make_shared<PrefixStore>(absl::StrCat("loom/pg/", options.group_name), base_store);
  {
    absl::MutexLock lock(&impl->mu);
    impl->sends.assign(size, 0);
    impl->recvs.assign(size, 0);
  }
  Store& store = *impl->store;

  // A group's keys are only valid once: a second group of the same name on
  // this store would read the first one's addresses.
  absl::StatusOr<int64_t> joined = store.add(absl::StrCat("join/", rank), 1);
  if (!joined.ok()) return withContext(joined.status(), who);
  if (*joined > 1) {
    return storeError(
        absl::StrCat(who, "this rank already created a group named '", options.group_name,
                     "' on this store; give each group a unique name"),
        absl::StatusCode::kAlreadyExists);
  }

  // Every rank publishes its options and reads everyone's: a mismatch is
  // reported by every rank, and a missing rank by number.
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat("options/", r));
  const std::string mine = describeOptions(options, size);
  if (absl::Status status = store.setString(keys[rank], mine); !status.ok()) {
    return withContext(status, who);
  }
  if (absl::Status status = store.wait(keys, options.timeout); !status.ok()) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      absl::StatusOr<bool> there = store.check({keys[r]});
      if (there.ok() && !*there) missing.push_back(r);
    }
    if (missing.empty()) return withContext(status, who);
    return timeoutError(absl::StrCat(who, "rank(s) [", absl::StrJoin(missing, ", "),
                                     "] never joined within ",
                                     absl::FormatDuration(options.timeout),
                                     "; start every rank of the group, with the same group name, "
                                     "or raise the timeout"));
  }
  absl::StatusOr<std::vector<Bytes>> all = store.multiGet(keys);
  if (!all.ok()) return withContext(all.status(), who);
  for (int r = 0; r < size; ++r) {
    const std::string theirs = toString((*all)[r]);
    if (theirs != mine) {
      return invalidArgumentError(
          absl::StrCat(who, "rank ", r, " created it with ", theirs, " but this rank with ", mine,
                       "; create a group with the same options everywhere"));
    }
  }

  if (!options.cpu_backend.empty()) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        createBackend(options.cpu_backend, Device::Type::kCpu, impl->backendContext("cpu"));
    if (!backend.ok()) return withContext(backend.status(), who);
    impl->cpu_backend = *std::move(backend);
  }
  if (options.checks != CollectiveChecks::kOff) {
    absl::StatusOr<std::unique_ptr<Backend>> side =
        createBackend("gloo", Device::Type::kCpu, impl->backendContext("checks"));
    if (!side.ok()) {
      return withContext(side.status(), absl::StrCat(who, "collective checks (",
                                                     std::string(checksName(options.checks)),
                                                     ") need a gloo side backend: "));
    }
    impl->checker = std::make_unique<debug::FingerprintChecker>(
        *std::move(side), impl->store, options.group_name, options.timeout);
    impl->issuer = std::make_unique<debug::CheckedIssuer>(
        *impl->checker, absl::StrCat("rank ", rank, " of ", size, ": "));
  }
  if (options.flight_recorder_entries > 0) {
    impl->recorder = std::make_shared<debug::FlightRecorder>(options.group_name, rank, size,
                                                             options.flight_recorder_entries);
  }
  // Nobody returns (and maybe destroys the group at once) before every rank
  // has finished connecting; otherwise a slower rank's connection attempts
  // would meet closed sockets.
  std::vector<std::string> connected;
  for (int r = 0; r < size; ++r) connected.push_back(absl::StrCat("connected/", r));
  if (absl::Status status = store.setString(connected[rank], "1"); !status.ok()) {
    return withContext(status, who);
  }
  if (absl::Status status = store.wait(connected, options.timeout); !status.ok()) {
    return withContext(status, who);
  }
  logMessage(LogLevel::kInfo, absl::StrCat("created group ", options.group_name, " (rank ", rank,
                                           " of ", size, "): ", describeOptions(options, size)));
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::~ProcessGroup() = default;

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::create(std::shared_ptr<Store> store,
                                                                   int rank, int size,
                                                                   ProcessGroupOptions options) {
  std::vector<int> global_ranks(std::max(size, 0));
  std::iota(global_ranks.begin(), global_ranks.end(), 0);
  return Impl::create(std::move(store), rank, size, std::move(options), std::move(global_ranks));
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
const std::string& ProcessGroup::name() const { return impl_->options.group_name; }
const std::vector<int>& ProcessGroup::globalRanks() const { return impl_->global_ranks; }
absl::Duration ProcessGroup::timeout() const { return impl_->options.timeout; }
const std::string& ProcessGroup::cpuBackend() const { return impl_->options.cpu_backend; }
const std::string& ProcessGroup::cudaBackend() const { return impl_->options.cuda_backend; }

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::newGroup(
    std::vector<int> ranks, std::optional<std::string> name) {
  return newGroup(std::move(ranks), NewGroupOptions{.name = std::move(name)});
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::newGroup(
    std::vector<int> ranks, const NewGroupOptions& new_options) {
  Impl& impl = *impl_;
  const std::string op = "new_group";
  if (ranks.empty()) {
    return invalidArgumentError(absl::StrCat(impl.where(op), "the rank list is empty"));
  }
  std::vector<int> seen;
  for (int r : ranks) {
    if (absl::Status status = impl.checkRank(op, "a listed rank", r); !status.ok()) return status;
    if (std::find(seen.begin(), seen.end(), r) != seen.end()) {
      return invalidArgumentError(absl::StrCat(impl.where(op), "rank ", r, " is listed twice in [",
                                               absl::StrJoin(ranks, ", "), "]"));
    }
    seen.push_back(r);
  }
  ProcessGroupOptions options = impl.options;
  if (new_options.backend.has_value()) {
    absl::StatusOr<BackendChoice> backends = parseBackendSpec(*new_options.backend);
    if (!backends.ok()) return withContext(backends.status(), impl.where(op));
    options.cpu_backend = backends->cpu;
    options.cuda_backend = backends->cuda;
  }
  options.timeout = new_options.timeout.value_or(options.timeout);
  options.checks = new_options.checks.value_or(options.checks);
  const auto it = std::find(ranks.begin(), ranks.end(), impl.rank);

  std::string group_name;
  std::string agreement_key;
  if (new_options.use_local_synchronization) {
    // Non-members take no part: they neither count the call nor wait.
    if (it == ranks.end()) return std::shared_ptr<ProcessGroup>();
    group_name = new_options.name.value_or(
        absl::StrCat(impl.options.group_name, "/[", absl::StrJoin(ranks, ","), "]"));
    agreement_key = absl::StrCat("new_group_local/", group_name);
  } else {
    uint64_t index;
    {
      absl::MutexLock lock(&impl.mu);
      index = ++impl.new_groups;
    }
    group_name = new_options.name.value_or(absl::StrCat(impl.options.group_name, "/", index));
    agreement_key = absl::StrCat("new_group/", index);
  }

  // The ranks that make this call agree on it: the first to arrive records
  // what it asks for, the others compare.
  const std::string call =
      absl::StrCat("ranks [", absl::StrJoin(ranks, ", "), "] named ", group_name, " with ",
                   describeOptions(options, static_cast<int>(ranks.size())));
  absl::StatusOr<Bytes> agreed = impl.store->compareSet(agreement_key, {}, toBytes(call));
  if (!agreed.ok()) return withContext(agreed.status(), impl.where(op));
  if (toString(*agreed) != call) {
    return invalidArgumentError(absl::StrCat(
        impl.where(op), "this rank asks for ", call, " but another rank asked for ",
        toString(*agreed),
        new_options.use_local_synchronization
            ? "; every member must call newGroup with the same ranks and options"
            : "; every rank must call newGroup with the same ranks and options, in the same "
              "order"));
  }

  if (it == ranks.end()) return std::shared_ptr<ProcessGroup>();
  options.group_name = group_name;
  std::vector<int> global_ranks;
  for (int r : ranks) global_ranks.push_back(impl.global_ranks[r]);
  return Impl::create(impl.base_store, static_cast<int>(it - ranks.begin()),
                      static_cast<int>(ranks.size()), std::move(options), std::move(global_ranks));
}

absl::StatusOr<int> ProcessGroup::globalRank(int group_rank) const {
  if (absl::Status s = impl_->checkRank("get_global_rank", "group_rank", group_rank); !s.ok()) {
    return s;
  }
  return impl_->global_ranks[group_rank];
}

absl::StatusOr<int> ProcessGroup::groupRank(int global_rank) const {
  const std::vector<int>& members = impl_->global_ranks;
  const auto it = std::find(members.begin(), members.end(), global_rank);
  if (it == members.end()) {
    return invalidArgumentError(absl::StrCat(impl_->where("get_group_rank"), "global rank ",
                                             global_rank, " is not a member; the members are [",
                                             absl::StrJoin(members, ", "), "]"));
  }
  return static_cast<int>(it - members.begin());
}

namespace {

template <typename Options>
Options withTimeout(Options options, absl::Duration group_timeout) {
  options.timeout = options.timeout.value_or(group_timeout);
  return options;
}

std::vector<std::vector<int64_t>> shapesOf(
    std::initializer_list<const Tensor*> singles,
    std::initializer_list<const std::vector<Tensor>*> lists) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor* tensor : singles) shapes.push_back(tensor->shape());
  for (const std::vector<Tensor>* list : lists) {
    for (const Tensor& tensor : *list) shapes.push_back(tensor.shape());
  }
  return shapes;
}

}  // namespace

ProcessGroup::WorkOr ProcessGroup::broadcast(Tensor tensor, const BroadcastOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "broadcast";
  if (absl::Status s = impl.checkRank(op, "root", options.root); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  if (impl.rank != options.root) {
    if (absl::Status s = impl.checkWritable(op, tensor, "tensor"); !s.ok()) return s;
  }
  const BroadcastOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .numel = tensor.numel(),
                     .root = options.root,
                     .common_shapes = shapesOf({&tensor}, {}),
                     .outputs = {tensor}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.broadcast(tensor, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::allReduce(Tensor tensor, const AllReduceOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "all_reduce";
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkReduce(op, options.op, tensor.dtype()); !s.ok()) return s;
  const AllReduceOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .numel = tensor.numel(),
                     .reduce_op = options.op,
                     .common_shapes = shapesOf({&tensor}, {}),
                     .outputs = {tensor}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.allReduce(tensor, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::reduce(Tensor tensor, const ReduceOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "reduce";
  if (absl::Status s = impl.checkRank(op, "root", options.root); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  // Every rank's tensor: the root's receives the result, the others' are
  // the engine's scratch (as in PyTorch's gloo backend).
  if (absl::Status s = impl.checkWritable(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkReduce(op, options.op, tensor.dtype()); !s.ok()) return s;
  const ReduceOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .numel = tensor.numel(),
                     .root = options.root,
                     .reduce_op = options.op,
                     .common_shapes = shapesOf({&tensor}, {}),
                     .outputs = {tensor}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.reduce(tensor, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::allGather(std::vector<Tensor> outputs, Tensor input,
                                             const AllGatherOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "all_gather";
  if (absl::Status s = impl.checkSelf(op, input, "input"); !s.ok()) return s;
  if (absl::Status s = impl.checkCount(op, "outputs", outputs.size()); !s.ok()) return s;
  // Output r holds rank r's input, whose size only rank r knows; this
  // rank's own output must match its input exactly.
  bool even = true;
  for (int r = 0; r < impl.size; ++r) {
    const int64_t numel = r == impl.rank ? input.numel() : outputs[r].numel();
    if (absl::Status s = impl.checkOne(op, outputs[r], absl::StrCat("output ", r), input.dtype(),
                                       numel, input.device());
        !s.ok()) {
      return s;
    }
    even = even && outputs[r].numel() == input.numel();
  }
  if (absl::Status s = impl.checkWritableEach(op, outputs, "output"); !s.ok()) return s;
  const AllGatherOptions resolved = withTimeout(options, impl.options.timeout);
  // An uneven all_gather is an all_to_all that sends the input to every
  // rank (the same bytes on the wire as a ring all_gather); every rank
  // passes the same sizes, so every rank takes the same path. Sizes differ
  // between ranks there, so only the dtype is compared across them.
  return impl.issue(
      {.op = op,
       .device = input.device(),
       .dtype = input.dtype(),
       .shapes = shapesOf({&input}, {&outputs}),
       .numel = even ? input.numel() : 0,
       .common_shapes = even ? shapesOf({&input}, {&outputs}) : std::vector<std::vector<int64_t>>{},
       .outputs = outputs},
      [=](Backend& backend, const CollectiveInfo& info) {
        if (even) return backend.allGather(outputs, input, resolved, info);
        return backend.allToAll(outputs, std::vector<Tensor>(outputs.size(), input),
                                AllToAllOptions{.timeout = resolved.timeout}, info);
      });
}

ProcessGroup::WorkOr ProcessGroup::allGatherIntoTensor(Tensor output, Tensor input,
                                                       const AllGatherOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "all_gather_into_tensor";
  if (absl::Status s = impl.checkSelf(op, input, "input"); !s.ok()) return s;
  if (absl::Status s = impl.checkOne(op, output, "output", input.dtype(), input.numel() * impl.size,
                                     input.device());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = impl.checkWritable(op, output, "output"); !s.ok()) return s;
  const AllGatherOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = input.device(),
                     .dtype = input.dtype(),
                     .shapes = shapesOf({&input, &output}, {}),
                     .numel = input.numel(),
                     .common_shapes = shapesOf({&input, &output}, {}),
                     .outputs = {output}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.allGatherIntoTensor(output, input, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::gather(std::vector<Tensor> outputs, Tensor input,
                                          const GatherOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "gather";
  if (absl::Status s = impl.checkRank(op, "root", options.root); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, input, "input"); !s.ok()) return s;
  if (absl::Status s = impl.checkRootList(op, outputs, "output", input, options.root); !s.ok()) {
    return s;
  }
  if (absl::Status s = impl.checkWritableEach(op, outputs, "output"); !s.ok()) return s;
  const GatherOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = input.device(),
                     .dtype = input.dtype(),
                     .shapes = shapesOf({&input}, {&outputs}),
                     .numel = input.numel(),
                     .root = options.root,
                     .common_shapes = shapesOf({&input}, {}),
                     .outputs = outputs},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.gather(outputs, input, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::scatter(Tensor output, std::vector<Tensor> inputs,
                                           const ScatterOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "scatter";
  if (absl::Status s = impl.checkRank(op, "root", options.root); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkRootList(op, inputs, "input", output, options.root); !s.ok()) {
    return s;
  }
  const ScatterOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = output.device(),
                     .dtype = output.dtype(),
                     .shapes = shapesOf({&output}, {&inputs}),
                     .numel = output.numel(),
                     .root = options.root,
                     .common_shapes = shapesOf({&output}, {}),
                     .outputs = {output}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.scatter(output, inputs, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::reduceScatter(Tensor output, std::vector<Tensor> inputs,
                                                 const ReduceScatterOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "reduce_scatter";
  if (absl::Status s = impl.checkSelf(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkCount(op, "inputs", inputs.size()); !s.ok()) return s;
  if (absl::Status s =
          impl.checkEach(op, inputs, "input", output.dtype(), output.numel(), output.device());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = impl.checkReduce(op, options.op, output.dtype()); !s.ok()) return s;
  const ReduceScatterOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = output.device(),
                     .dtype = output.dtype(),
                     .shapes = shapesOf({&output}, {&inputs}),
                     .numel = output.numel(),
                     .reduce_op = options.op,
                     .common_shapes = shapesOf({&output}, {&inputs}),
                     .outputs = {output}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.reduceScatter(output, inputs, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::reduceScatterTensor(Tensor output, Tensor input,
                                                       const ReduceScatterOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "reduce_scatter_tensor";
  if (absl::Status s = impl.checkSelf(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, output, "output"); !s.ok()) return s;
  if (absl::Status s = impl.checkOne(op, input, "input", output.dtype(), output.numel() * impl.size,
                                     output.device());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = impl.checkReduce(op, options.op, output.dtype()); !s.ok()) return s;
  const ReduceScatterOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = output.device(),
                     .dtype = output.dtype(),
                     .shapes = shapesOf({&output, &input}, {}),
                     .numel = output.numel(),
                     .reduce_op = options.op,
                     .common_shapes = shapesOf({&output, &input}, {}),
                     .outputs = {output}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.reduceScatterTensor(output, input, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                                            const AllToAllOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "all_to_all";
  if (absl::Status s = impl.checkCount(op, "inputs", inputs.size()); !s.ok()) return s;
  if (absl::Status s = impl.checkCount(op, "outputs", outputs.size()); !s.ok()) return s;
  if (absl::Status s = impl.checkWritableEach(op, outputs, "output"); !s.ok()) return s;
  // Sizes may differ per peer (what rank r sends must match what it
  // receives there, which only the ranks together know).
  const DType dtype = inputs[0].dtype();
  const Device device = inputs[0].device();
  for (int r = 0; r < impl.size; ++r) {
    if (absl::Status s = impl.checkOne(op, inputs[r], absl::StrCat("input ", r), dtype,
                                       inputs[r].numel(), device);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = impl.checkOne(op, outputs[r], absl::StrCat("output ", r), dtype,
                                       outputs[r].numel(), device);
        !s.ok()) {
      return s;
    }
  }
  const AllToAllOptions resolved = withTimeout(options, impl.options.timeout);
  // Sizes may differ per peer, so only the dtype is compared across ranks.
  return impl.issue({.op = op,
                     .device = device,
                     .dtype = dtype,
                     .shapes = shapesOf({}, {&inputs, &outputs}),
                     .outputs = outputs},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.allToAll(outputs, inputs, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::allToAllSingle(Tensor output, Tensor input,
                                                  std::vector<int64_t> output_splits,
                                                  std::vector<int64_t> input_splits,
                                                  const AllToAllOptions& options) {
  Impl& impl = *impl_;
  const std::string op = "all_to_all_single";
  if (absl::Status s = impl.checkSelf(op, input, "input"); !s.ok()) return s;
  if (absl::Status s =
          impl.checkOne(op, output, "output", input.dtype(), output.numel(), input.device());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = impl.checkWritable(op, output, "output"); !s.ok()) return s;
  if (input.shape().empty() || output.shape().empty()) {
    return invalidArgumentError(absl::StrCat(impl.where(op), "input ", input.toString(),
                                             " and output ", output.toString(),
                                             " need at least one dim to split"));
  }
  if (!std::equal(input.shape().begin() + 1, input.shape().end(), output.shape().begin() + 1,
                  output.shape().end())) {
    return invalidArgumentError(absl::StrCat(impl.where(op), "input ", input.toString(),
                                             " and output ", output.toString(),
                                             " must have rows (all dims but the first) of the "
                                             "same shape"));
  }
  auto resolve = [&](std::vector<int64_t>& splits, const Tensor& tensor,
                     const std::string& what) -> absl::Status {
    const int64_t rows = tensor.shape()[0];
    if (splits.empty()) {
      if (rows % impl.size != 0) {
        return invalidArgumentError(absl::StrCat(impl.where(op), what, " ", tensor.toString(),
                                                 " has ", rows,
                                                 " rows, which do not split "
                                                 "evenly over ",
                                                 impl.size, " ranks; pass ", what, "_splits"));
      }
      splits.assign(impl.size, rows / impl.size);
      return absl::OkStatus();
    }
    if (splits.size() != static_cast<size_t>(impl.size)) {
      return invalidArgumentError(absl::StrCat(impl.where(op), what, "_splits has ", splits.size(),
                                               " entries but the group has ", impl.size,
                                               " ranks; pass one per rank"));
    }
    int64_t sum = 0;
    for (int64_t split : splits) {
      if (split < 0) {
        return invalidArgumentError(absl::StrCat(impl.where(op), what, "_splits [",
                                                 absl::StrJoin(splits, ", "),
                                                 "] has a negative entry"));
      }
      sum += split;
    }
    if (sum != rows) {
      return invalidArgumentError(absl::StrCat(
          impl.where(op), what, "_splits [", absl::StrJoin(splits, ", "), "] sum to ", sum, " but ",
          what, " ", tensor.toString(), " has ", rows, " rows; make them sum to dim 0"));
    }
    return absl::OkStatus();
  };
  const bool explicit_splits = !input_splits.empty() || !output_splits.empty();
  if (absl::Status s = resolve(input_splits, input, "input"); !s.ok()) return s;
  if (absl::Status s = resolve(output_splits, output, "output"); !s.ok()) return s;
  const AllToAllOptions resolved = withTimeout(options, impl.options.timeout);
  // With even splits every rank holds the same number of elements; with
  // explicit ones they may differ, and only the dtype is compared.
  const bool even = !explicit_splits;
  return impl.issue(
      {.op = op,
       .device = input.device(),
       .dtype = input.dtype(),
       .shapes = shapesOf({&input, &output}, {}),
       .numel = even ? input.numel() : 0,
       .common_shapes =
           even ? shapesOf({&input, &output}, {}) : std::vector<std::vector<int64_t>>{},
       .outputs = {output}},
      [=](Backend& backend, const CollectiveInfo& info) {
        return backend.allToAllSingle(output, input, output_splits, input_splits, resolved, info);
      });
}

ProcessGroup::WorkOr ProcessGroup::barrier(const BarrierOptions& options) {
  Impl& impl = *impl_;
  const BarrierOptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = "barrier", .device = Device::cpu(), .dtype = DType::kUInt8},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.barrier(resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::send(Tensor tensor, int dst, const P2POptions& options) {
  Impl& impl = *impl_;
  const std::string op = "send";
  if (absl::Status s = impl.checkPeer(op, "dst", dst); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkTag(op, options.tag); !s.ok()) return s;
  const P2POptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .peer = dst,
                     .is_send = true,
                     .outputs = {tensor}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.send(tensor, dst, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::recv(Tensor tensor, int src, const P2POptions& options) {
  Impl& impl = *impl_;
  const std::string op = "recv";
  if (absl::Status s = impl.checkPeer(op, "src", src); !s.ok()) return s;
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkTag(op, options.tag); !s.ok()) return s;
  const P2POptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .peer = src,
                     .is_send = false,
                     .outputs = {tensor}},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.recv(tensor, src, resolved, info);
                    });
}

ProcessGroup::WorkOr ProcessGroup::recvAnySource(Tensor tensor, const P2POptions& options) {
  Impl& impl = *impl_;
  const std::string op = "recv_any_source";
  if (impl.size < 2) {
    return invalidArgumentError(
        absl::StrCat(impl.where(op), "the group has no other rank to receive from"));
  }
  if (absl::Status s = impl.checkSelf(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkWritable(op, tensor, "tensor"); !s.ok()) return s;
  if (absl::Status s = impl.checkTag(op, options.tag); !s.ok()) return s;
  const P2POptions resolved = withTimeout(options, impl.options.timeout);
  return impl.issue({.op = op,
                     .device = tensor.device(),
                     .dtype = tensor.dtype(),
                     .shapes = shapesOf({&tensor}, {}),
                     .outputs = {tensor},
                     .any_source = true},
                    [=](Backend& backend, const CollectiveInfo& info) {
                      return backend.recvAnySource(tensor, resolved, info);
                    });
}

absl::StatusOr<std::vector<std::shared_ptr<Work>>> ProcessGroup::batchIsendIrecv(
    std::vector<P2POp> ops) {
  Impl& impl = *impl_;
  // Check the whole batch before issuing any of it.
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& p = ops[i];
    const bool is_send = p.kind == P2POp::Kind::kSend;
    const std::string op =
        absl::StrCat("batch_isend_irecv op ", i, " (", is_send ? "send" : "recv", ")");
    if (absl::Status s = impl.checkPeer(op, "peer", p.peer); !s.ok()) return s;
    if (absl::Status s = impl.checkSelf(op, p.tensor, "tensor"); !s.ok()) return s;
    if (!is_send) {
      if (absl::Status s = impl.checkWritable(op, p.tensor, "tensor"); !s.ok()) return s;
    }
    if (absl::Status s = impl.checkTag(op, p.tag); !s.ok()) return s;
  }
  std::vector<std::shared_ptr<Work>> works;
  for (const P2POp& p : ops) {
    P2POptions options;
    options.tag = p.tag;
    WorkOr work = p.kind == P2POp::Kind::kSend ? send(p.tensor, p.peer, options)
                                               : recv(p.tensor, p.peer, options);
    if (!work.ok()) {
      // The batch is all or nothing: give up on what was already posted.
      for (const std::shared_ptr<Work>& issued : works) issued->abort();
      return work.status();
    }
    works.push_back(*std::move(work));
  }
  return works;
}

namespace {

// Waits for an issued call: one Status for both ways a call can fail.
absl::Status finish(const ProcessGroup::WorkOr& work) {
  if (!work.ok()) return work.status();
  return (*work)->wait();
}

}  // namespace

absl::Status ProcessGroup::broadcastSync(Tensor tensor, const BroadcastOptions& options) {
  return finish(broadcast(std::move(tensor), options));
}
absl::Status ProcessGroup::allReduceSync(Tensor tensor, const AllReduceOptions& options) {
  return finish(allReduce(std::move(tensor), options));
}
absl::Status ProcessGroup::reduceSync(Tensor tensor, const ReduceOptions& options) {
  return finish(reduce(std::move(tensor), options));
}
absl::Status ProcessGroup::allGatherSync(std::vector<Tensor> outputs, Tensor input,
                                         const AllGatherOptions& options) {
  return finish(allGather(std::move(outputs), std::move(input), options));
}
absl::Status ProcessGroup::allGatherIntoTensorSync(Tensor output, Tensor input,
                                                   const AllGatherOptions& options) {
  return finish(allGatherIntoTensor(std::move(output), std::move(input), options));
}
absl::Status ProcessGroup::gatherSync(std::vector<Tensor> outputs, Tensor input,
                                      const GatherOptions& options) {
  return finish(gather(std::move(outputs), std::move(input), options));
}
absl::Status ProcessGroup::scatterSync(Tensor output, std::vector<Tensor> inputs,
                                       const ScatterOptions& options) {
  return finish(scatter(std::move(output), std::move(inputs), options));
}
absl::Status ProcessGroup::reduceScatterSync(Tensor output, std::vector<Tensor> inputs,
                                             const ReduceScatterOptions& options) {
  return finish(reduceScatter(std::move(output), std::move(inputs), options));
}
absl::Status ProcessGroup::reduceScatterTensorSync(Tensor output, Tensor input,
                                                   const ReduceScatterOptions& options) {
  return finish(reduceScatterTensor(std::move(output), std::move(input), options));
}
absl::Status ProcessGroup::allToAllSync(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                                        const AllToAllOptions& options) {
  return finish(allToAll(std::move(outputs), std::move(inputs), options));
}
absl::Status ProcessGroup::allToAllSingleSync(Tensor output, Tensor input,
                                              std::vector<int64_t> output_splits,
                                              std::vector<int64_t> input_splits,
                                              const AllToAllOptions& options) {
  return finish(allToAllSingle(std::move(output), std::move(input), std::move(output_splits),
                               std::move(input_splits), options));
}
absl::Status ProcessGroup::barrierSync(const BarrierOptions& options) {
  return finish(barrier(options));
}
absl::Status ProcessGroup::sendSync(Tensor tensor, int dst, const P2POptions& options) {
  return finish(send(std::move(tensor), dst, options));
}
absl::Status ProcessGroup::recvSync(Tensor tensor, int src, const P2POptions& options) {
  return finish(recv(std::move(tensor), src, options));
}
absl::StatusOr<int> ProcessGroup::recvAnySourceSync(Tensor tensor, const P2POptions& options) {
  WorkOr work = recvAnySource(std::move(tensor), options);
  if (absl::Status s = finish(work); !s.ok()) return s;
  return (*work)->sourceRank();
}

absl::Status ProcessGroup::monitoredBarrier(std::optional<absl::Duration> timeout,
                                            bool wait_all_ranks) {
  Impl& impl = *impl_;
  Call call;
  call.op = "monitored_barrier";
  const CollectiveInfo info = impl.nextInfo(call);
  const uint64_t id = impl.recordStart(info, call);
  const absl::Status status =
      impl.monitoredBarrier(info, timeout.value_or(impl.options.timeout), wait_all_ranks);
  impl.recordEnd(id, status);
  return status;
}

// Through the store rather than the backend, so that it works whatever
// state the backend is in: every rank but 0 leaves an arrival key; rank 0
// waits for them up to the timeout and publishes a verdict naming the
// missing ranks, which every rank returns.
absl::Status ProcessGroup::Impl::monitoredBarrier(const CollectiveInfo& info, absl::Duration limit,
                                                  bool wait_all_ranks) {
  const std::string base = absl::StrCat("monitored_barrier/", info.seq, "/");
  const std::string verdict_key = base + "verdict";
  if (rank != 0) {
    if (absl::Status s = store->setString(absl::StrCat(base, "arrived/", rank), "1"); !s.ok()) {
      return withContext(s, absl::StrCat(info.describe(), ": "));
    }
    // Rank 0 reports at `limit` after it arrived; give it time to.
    const absl::Duration grace = std::min(limit, absl::Seconds(5));
    if (absl::Status s = store->wait({verdict_key}, limit + grace); !s.ok()) {
      // A store that failed (the server went away) is the cause; only a
      // timeout means rank 0 never reported.
      if (errorKind(s) != ErrorKind::kTimeout) {
        return withContext(s, absl::StrCat(info.describe(), ": "));
      }
      return timeoutError(absl::StrCat(info.describe(), ": rank 0 did not report within ",
                                       absl::FormatDuration(limit + grace),
                                       "; rank 0 is missing, stuck, or much later than the rest"));
    }
    absl::StatusOr<std::string> verdict = store->getString(verdict_key);
    if (!verdict.ok()) return withContext(verdict.status(), absl::StrCat(info.describe(), ": "));
    if (verdict->empty()) return absl::OkStatus();
    return timeoutError(absl::StrCat(info.describe(), ": ", *verdict, " (reported by rank 0)"));
  }
  std::vector<std::string> keys;
  for (int r = 1; r < size; ++r) keys.push_back(absl::StrCat(base, "arrived/", r));
  std::string verdict;
  if (absl::Status s = keys.empty() ? absl::OkStatus() : store->wait(keys, limit); !s.ok()) {
    if (errorKind(s) != ErrorKind::kTimeout) {
      return withContext(s, absl::StrCat(info.describe(), ": "));
    }
    std::vector<int> missing;
    for (int r = 1; r < size; ++r) {
      absl::StatusOr<bool> there = store->check({keys[r - 1]});
      if (there.ok() && !*there) missing.push_back(r);
      if (!wait_all_ranks && !missing.empty()) break;
    }
    // Empty when the last ranks arrived just after the wait gave up.
    if (!missing.empty()) {
      verdict = absl::StrCat(missing.size() == 1 ? "rank " : "ranks ", absl::StrJoin(missing, ", "),
                             " did not arrive within ", absl::FormatDuration(limit),
                             wait_all_ranks ? "" : " (the first missing rank; others not checked)",
                             "; check that they are alive and reach this barrier");
    }
  }
  if (absl::Status s = store->setString(verdict_key, verdict); !s.ok()) {
    return withContext(s, absl::StrCat(info.describe(), ": "));
  }
  if (verdict.empty()) return absl::OkStatus();
  return timeoutError(absl::StrCat(info.describe(), ": ", verdict));
}

void ProcessGroup::abort() {
  Impl& impl = *impl_;
  logMessage(LogLevel::kWarning, absl::StrCat("aborting group ", impl.options.group_name, " (rank ",
                                              impl.rank, " of ", impl.size, ")"));
  if (impl.issuer != nullptr) impl.issuer->abortAll();
  if (impl.cpu_backend != nullptr) impl.cpu_backend->abort();
  absl::MutexLock lock(&impl.mu);
  if (impl.cuda_backend != nullptr) impl.cuda_backend->abort();
}

}  // namespace loom::comm
