// The Gloo backend: a Gloo context per group, a worker thread that runs
// collectives in issue order, and a small pool that waits on point-to-point
// transfers.
#include "comm/gloo/gloo_backend.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "comm/errors.h"
#include "comm/gloo/gloo_reduce.h"
#include "comm/gloo/gloo_store.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/gather.h"
#include "gloo/reduce.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/scatter.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"

namespace loom::comm::gloo {
namespace {

// c10d's slot prefix for send/recv: apart from every prefix Gloo's own
// collectives use, so a user tag can never meet a collective's slot.
constexpr uint8_t kSendRecvSlotPrefix = 0x80;
// Threads that wait on point-to-point transfers. The transfers are posted
// when issued, so waiting on more of them than this in order only delays
// completions; it cannot deadlock.
constexpr size_t kMaxP2PWaiters = 16;
// Reduce-scatter plans kept (each holds about three copies of its input).
// Eviction follows the call sequence, which is the same on every rank, so
// the ranks' plans stay matched.
constexpr size_t kMaxReduceScatterPlans = 4;
// The tag of the barrier that settles a reduce-scatter (Engine::settle):
// collectives take their sequence number as tag, which never reaches this
// in practice, and a barrier only meets barriers.
constexpr uint32_t kSettleTag = 0xffffffffu;

// Gloo adds timeouts to now(); keep the sum in range.
std::chrono::milliseconds toChrono(absl::Duration timeout) {
  const absl::Duration capped = std::min(timeout, absl::Hours(24 * 365));
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(capped)));
}

absl::Status withContext(const absl::Status& status, const std::string& prefix) {
  return makeError(errorKind(status), status.code(), absl::StrCat(prefix, status.message()));
}

// Which group rank owns each socket address of this rank's connections.
// Gloo's transport errors name a peer only by the address of its end of
// the socket ("Read error [10.0.0.7]:41234: ..."). Once the mesh is
// connected every rank publishes the local address of each of its
// connections, so a failure can be mapped back to the peer's rank.
using PeerAddresses = std::map<std::string, int>;

// The rank whose socket address appears in a Gloo message, if any.
std::optional<int> peerNamedIn(const PeerAddresses& peers, std::string_view what) {
  for (size_t open = what.find('['); open != std::string_view::npos;
       open = what.find('[', open + 1)) {
    const size_t close = what.find("]:", open);
    if (close == std::string_view::npos) break;
    size_t end = close + 2;
    while (end < what.size() && absl::ascii_isdigit(static_cast<unsigned char>(what[end]))) ++end;
    auto found = peers.find(std::string(what.substr(open, end - open)));
    if (found != peers.end()) return found->second;
  }
  return std::nullopt;
}

// A Gloo exception as the error of the call it interrupted. Gloo reports
// timeouts and lost connections as IoException, naming the peer only by
// socket address; send/recv know their peer, collectives look it up.
absl::Status engineError(const CollectiveInfo& info, const std::string& what, bool io,
                         const PeerAddresses& peers) {
  std::optional<int> named = info.peer >= 0 ? std::optional<int>(info.peer) : std::nullopt;
  if (!named) named = peerNamedIn(peers, what);
  const std::string peer = named ? absl::StrCat("peer rank ", *named) : std::string("a peer");
  if (io && absl::StrContains(what, "Timed out")) {
    return timeoutError(absl::StrCat(info.describe(), " timed out in gloo: ", what, "; ", peer,
                                     " did not take part in time (is it alive and making the "
                                     "same calls in the same order?), or raise the timeout"));
  }
  if (io) {
    return networkError(absl::StrCat(info.describe(), " lost its connection to ", peer, ": ",
                                     what, "; a peer process probably exited or was killed"));
  }
  return backendError(absl::StrCat(info.describe(), " failed in gloo: ", what));
}

// The IP of an IPv4 or IPv6 socket address as text, and its port.
std::optional<std::pair<std::string, int>> ipAndPort(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    if (inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::make_pair(std::string(text), static_cast<int>(ntohs(v4.sin_port)));
  }
  if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::make_pair(std::string(text), static_cast<int>(ntohs(v6.sin6_port)));
  }
  return std::nullopt;
}

// The local address a UDP socket would use to reach `host` (no packet is
// sent): the interface a multi-host job's peers can reach us on.
std::optional<std::string> localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return std::nullopt;
  std::optional<std::string> result;
  const int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      if (auto ip = ipAndPort(local)) result = ip->first;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return result;
}

// Gloo's TCP transport writes to sockets without MSG_NOSIGNAL, so a peer
// that dies mid-transfer would kill this process with SIGPIPE instead of
// failing the call. PyTorch never sees this because Python ignores SIGPIPE;
// we do the same, unless the program installed a handler of its own.
void ignoreSigpipe() {
  static const bool kIgnored = [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)kIgnored;
}

class Engine;

struct Task {
  std::shared_ptr<Work> work;
  std::function<absl::Status(Engine&)> run;
  // Whether completing this call shows that every rank has finished the
  // calls before it (true of every collective but reduce-scatter; see
  // Engine::settle).
  bool settles = true;
};

// Runs `task`, turning whatever Gloo throws into a Status. `engine_failed`
// tells a Gloo failure (the context is unusable after it) from an error
// the call itself returned.
absl::Status runGuarded(Task& task, Engine& engine, const PeerAddresses& peers,
                        bool* engine_failed) {
  const CollectiveInfo& info = task.work->info();
  *engine_failed = true;
  try {
    absl::Status status = task.run(engine);
    *engine_failed = false;
    return status;
  } catch (const ::gloo::IoException& e) {
    return engineError(info, e.what(), /*io=*/true, peers);
  } catch (const std::exception& e) {
    return engineError(info, e.what(), /*io=*/false, peers);
  } catch (...) {
    return engineError(info, "unknown exception", /*io=*/false, peers);
  }
}

// A reduce-scatter of `count` elements with Gloo's halving-doubling
// algorithm, which owns its scratch buffers and binds Gloo slots when built:
// so it is built once per (dtype, op, count) and reused.
class ReduceScatterPlan {
 public:
  // noexcept(false) as gloo::Algorithm's destructor, which the plan holds.
  virtual ~ReduceScatterPlan() noexcept(false) = default;
  // `count` elements: the input goes in, this rank's chunk comes out at the
  // front.
  virtual void* buffer() = 0;
  virtual void run() = 0;
};

template <typename T>
class TypedReduceScatterPlan : public ReduceScatterPlan {
 public:
  TypedReduceScatterPlan(const std::shared_ptr<::gloo::Context>& context, int count,
                         const ::gloo::ReductionFunction<T>* fn)
      : data_(new T[count]),
        algorithm_(context, {data_.get()}, count,
                   std::vector<int>(context->size, count / context->size), fn) {}
  void* buffer() override { return data_.get(); }
  void run() override { algorithm_.run(); }

 private:
  std::unique_ptr<T[]> data_;
  ::gloo::ReduceScatterHalvingDoubling<T> algorithm_;
};

// The state the backend shares with its Works: the Gloo context, the queues,
// the threads and the caches. Works hold it weakly, so a Work can outlive
// its group.
class Engine {
 public:
  Engine(std::shared_ptr<::gloo::rendezvous::Context> context, PeerAddresses peers)
      : context_(std::move(context)), peers_(std::move(peers)) {}
  ~Engine() { shutdown(); }

  // Starts the worker, once the engine is complete.
  void start() {
    absl::MutexLock lock(&mu_);
    startThreadLocked([](Engine& engine) { engine.workerLoop(); });
  }

  const std::shared_ptr<::gloo::rendezvous::Context>& context() const { return context_; }
  const PeerAddresses& peers() const { return peers_; }
  int rank() const { return context_->rank; }
  int size() const { return context_->size; }

  // OK while the engine runs; after a failure or abort, the error for a
  // call `info` that can no longer run.
  absl::Status usable(const CollectiveInfo& info) {
    absl::MutexLock lock(&mu_);
    return brokenErrorLocked(info);
  }

  // Queues `run` behind the calls issued before it.
  absl::Status enqueue(std::shared_ptr<Work> work, std::function<absl::Status(Engine&)> run,
                       bool settles) {
    absl::MutexLock lock(&mu_);
    if (absl::Status broken = brokenErrorLocked(work->info()); !broken.ok()) return broken;
    queue_.push_back(Task{std::move(work), std::move(run), settles});
    return absl::OkStatus();
  }

  // Hands the wait of a posted send/recv to the waiter pool.
  void awaitTransfer(std::shared_ptr<Work> work, std::function<absl::Status(Engine&)> wait) {
    absl::MutexLock lock(&mu_);
    transfers_.push_back(Task{std::move(work), std::move(wait), false});
    if (idle_waiters_ < transfers_.size() && waiters_ < kMaxP2PWaiters) {
      ++waiters_;
      startThreadLocked([](Engine& engine) { engine.waiterLoop(); });
    }
  }

  // Stops the engine: queued calls fail, later calls are refused, and the
  // connections close so that peers blocked on this rank fail at once. A
  // call already inside Gloo on this rank ends at its own timeout (Gloo
  // offers no way to interrupt a local wait), and its Work has failed
  // already.
  void abort(const absl::Status& reason) {
    std::deque<Task> dropped;
    bool close = false;
    {
      absl::MutexLock lock(&mu_);
      if (broken_.ok()) broken_ = reason;
      dropped.swap(queue_);
      close = !closed_;
      closed_ = true;
    }
    for (Task& task : dropped) task.work->complete(usable(task.work->info()));
    if (close) context_->closeConnections();
  }

  // Runs what is queued and joins the threads. A call stuck inside Gloo
  // (after an abort, say) holds this up until its own timeout: Gloo offers
  // no way to interrupt it, and its buffers must not go away under it.
  void shutdown() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      threads.swap(threads_);
    }
    for (std::thread& thread : threads) thread.join();
    bool broken;
    {
      absl::MutexLock lock(&mu_);
      broken = !broken_.ok();
    }
    // Peers that also tear down wait here for each other; a peer that does
    // not is given a few seconds, then left to find the connection closed.
    if (!broken) {
      try {
        settle(std::min(context_->getTimeout(), std::chrono::milliseconds(5000)));
      } catch (const std::exception&) {
        // The group is going away; a peer that left first is no error here.
      }
    }
  }

  // Worker thread only: a buffer of at least `bytes`, kept between calls so
  // that steady-state calls allocate nothing.
  uint8_t* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  // Worker thread only: a reduce-scatter ran. Gloo's halving-doubling
  // algorithm returns as soon as this rank has its chunk, while peers may
  // still be finishing theirs with messages to and from this rank; tearing
  // down its buffers (evicting the plan) or the connections (destroying the
  // group) before they are done makes them fail. Any later collective
  // settles that, since no rank reaches it before finishing the
  // reduce-scatter; until then, settle() runs a barrier before tearing down.
  void markUnsettled() { unsettled_ = true; }

  // Worker thread only.
  ReduceScatterPlan& reduceScatterPlan(DType dtype, ReduceOp op, int count) {
    if (!primed_) primeSendBuffers();
    if (op == ReduceOp::kAvg) op = ReduceOp::kSum;
    const auto key = std::make_tuple(dtype, op, count);
    for (auto it = plans_.begin(); it != plans_.end(); ++it) {
      if (it->first == key) {
        plans_.splice(plans_.begin(), plans_, it);
        return *plans_.front().second;
      }
    }
    if (plans_.size() == kMaxReduceScatterPlans) {
      settle(context_->getTimeout());
      plans_.pop_back();
    }
    std::unique_ptr<ReduceScatterPlan> plan = visitDType(dtype, [&](auto tag) {
      using T = std::conditional_t<std::is_same_v<decltype(tag), bool>, Bool8, decltype(tag)>;
      return std::unique_ptr<ReduceScatterPlan>(
          new TypedReduceScatterPlan<T>(context_, count, inPlaceReduction<T>(op)));
    });
    plans_.emplace_front(key, std::move(plan));
    return *plans_.front().second;
  }

 private:
  // Gloo's pair-based ("old-style") algorithms, reduce-scatter among them,
  // fix a connection's SO_SNDBUF once, at the size of the first message
  // they send on it, and never raise it. A first reduce-scatter of a few
  // tens of KiB thus pins the buffers small, and every later message that
  // outgrows them is written in pieces whose tail waits for a delayed ACK:
  // 128 KiB reduce-scatters after 64 KiB ones took 20-40 ms instead of
  // 0.5 ms on loopback (docs/comm_bench.md). So the first reduce-scatter of
  // an engine is preceded by one whose every message is at least
  // kPrimeChunkBytes, which lets the kernel's limit (net.core.wmem_max)
  // decide the buffers instead.
  void primeSendBuffers() {
    primed_ = true;
    constexpr int64_t kPrimeChunkBytes = 256 << 10;
    constexpr int64_t kPrimeMaxBytes = 64 << 20;
    if (size() == 1) return;
    const int64_t bytes = std::min(kPrimeMaxBytes, kPrimeChunkBytes * size());
    const int count = static_cast<int>(bytes / static_cast<int64_t>(sizeof(float)));
    TypedReduceScatterPlan<float> prime(context_, count, inPlaceReduction<float>(ReduceOp::kSum));
    std::memset(prime.buffer(), 0, static_cast<size_t>(count) * sizeof(float));
    prime.run();
    unsettled_ = true;
    settle(context_->getTimeout());
  }

  void startThreadLocked(void (*loop)(Engine&)) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    threads_.emplace_back([this, loop] { loop(*this); });
  }

  absl::Status brokenErrorLocked(const CollectiveInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_.ok()) return absl::OkStatus();
    return makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                     absl::StrCat(info.describe(), " cannot run: the gloo backend of this group "
                                  "stopped after an earlier failure (", broken_.message(),
                                  "); a Gloo group cannot recover, create a new group"));
  }

  void settle(std::chrono::milliseconds timeout) {
    if (!unsettled_) return;
    ::gloo::BarrierOptions opts(context_);
    opts.setTag(kSettleTag);
    opts.setTimeout(timeout);
    ::gloo::barrier(opts);
    unsettled_ = false;
  }

  bool hasTask() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }
  bool hasTransfer() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !transfers_.empty() || stopping_;
  }

  // Completes `task` with what running it gave, and says whether it
  // succeeded; a Gloo failure stops the engine, since Gloo leaves the
  // context unusable after one.
  bool finish(Task& task, bool skip) {
    absl::Status status;
    bool engine_failed = false;
    if (!skip) status = runGuarded(task, *this, peers_, &engine_failed);
    if (engine_failed) {
      // A call that fails because an abort closed the connections under it
      // reports the abort, not the symptom Gloo saw.
      absl::Status cause;
      {
        absl::MutexLock lock(&mu_);
        cause = broken_;
      }
      if (!cause.ok()) {
        status = makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                           absl::StrCat(task.work->info().describe(), " was interrupted: ",
                                        cause.message()));
      }
      abort(status);
    }
    task.work->complete(status);
    return !skip && status.ok();
  }

  void workerLoop() {
    while (true) {
      Task task;
      absl::Status broken;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Engine::hasTask));
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
        broken = brokenErrorLocked(task.work->info());
      }
      if (!broken.ok()) {
        task.work->complete(broken);
        continue;
      }
      // A Work that already failed (timed out or aborted) aborted the engine.
      if (finish(task, /*skip=*/task.work->isCompleted()) && task.settles) unsettled_ = false;
    }
  }

  void waiterLoop() {
    while (true) {
      Task task;
      {
        absl::MutexLock lock(&mu_);
        ++idle_waiters_;
        mu_.Await(absl::Condition(this, &Engine::hasTransfer));
        --idle_waiters_;
        if (transfers_.empty()) return;
        task = std::move(transfers_.front());
        transfers_.pop_front();
      }
      finish(task, /*skip=*/false);
    }
  }

  const std::shared_ptr<::gloo::rendezvous::Context> context_;
  const PeerAddresses peers_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Task> transfers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  size_t waiters_ ABSL_GUARDED_BY(mu_) = 0;
  size_t idle_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  // Worker thread only (and shutdown, after the worker is joined).
  bool unsettled_ = false;
  bool primed_ = false;  // worker thread only
  std::vector<uint8_t> scratch_;
  std::list<std::pair<std::tuple<DType, ReduceOp, int>, std::unique_ptr<ReduceScatterPlan>>>
      plans_;
};

// A collective's Work: aborting it aborts the engine, since a collective
// that one rank gave up on cannot complete on the others either.
class GlooWork : public Work {
 public:
  GlooWork(const CollectiveInfo& info, absl::Duration timeout, std::weak_ptr<Engine> engine)
      : Work(info, timeout), engine_(std::move(engine)) {}

 protected:
  void abortEngine() override {
    if (std::shared_ptr<Engine> engine = engine_.lock()) engine->abort(exception());
  }

 private:
  std::weak_ptr<Engine> engine_;
};

// A send or receive: aborting it stops waiting on its buffer, as c10d does.
class TransferWork : public Work {
 public:
  TransferWork(const CollectiveInfo& info, absl::Duration timeout,
               std::unique_ptr<::gloo::transport::UnboundBuffer> buffer, bool is_send)
      : Work(info, timeout), buffer_(std::move(buffer)), is_send_(is_send) {}

  ::gloo::transport::UnboundBuffer& buffer() { return *buffer_; }

 protected:
  void abortEngine() override {
    if (is_send_) {
      buffer_->abortWaitSend();
    } else {
      buffer_->abortWaitRecv();
    }
  }

 private:
  const std::unique_ptr<::gloo::transport::UnboundBuffer> buffer_;
  const bool is_send_;
};

// Whether tensors[r] lies right after tensors[r - 1] for every r, so that
// Gloo can use their memory as one buffer.
bool adjacent(const std::vector<Tensor>& tensors) {
  for (size_t r = 1; r < tensors.size(); ++r) {
    if (static_cast<const uint8_t*>(tensors[r].data()) !=
        static_cast<const uint8_t*>(tensors[r - 1].data()) + tensors[r - 1].nbytes()) {
      return false;
    }
  }
  return true;
}

size_t totalBytes(const std::vector<Tensor>& tensors) {
  size_t bytes = 0;
  for (const Tensor& tensor : tensors) bytes += tensor.nbytes();
  return bytes;
}

void pack(const std::vector<Tensor>& tensors, uint8_t* out) {
  for (const Tensor& tensor : tensors) {
    if (tensor.nbytes() > 0) std::memcpy(out, tensor.data(), tensor.nbytes());
    out += tensor.nbytes();
  }
}

void unpack(const uint8_t* in, const std::vector<Tensor>& tensors) {
  for (const Tensor& tensor : tensors) {
    if (tensor.nbytes() > 0) std::memcpy(tensor.data(), in, tensor.nbytes());
    in += tensor.nbytes();
  }
}

// Gloo's collective slots are built from a 32-bit tag; the sequence number
// keeps concurrent calls apart and wraps harmlessly.
uint32_t tagOf(const CollectiveInfo& info) { return static_cast<uint32_t>(info.seq); }

absl::Status finishAvg(ReduceOp op, const Tensor& tensor, int size) {
  if (op != ReduceOp::kAvg) return absl::OkStatus();
  return divideInPlace(tensor.data(), tensor.dtype(), tensor.numel(), size);
}

// Gathers every rank's `input` into `out`, rank order.
void allGatherInto(Engine& engine, uint8_t* out, const Tensor& input, const CollectiveInfo& info,
                   absl::Duration timeout) {
  if (input.nbytes() == 0) return;
  ::gloo::AllgatherOptions opts(engine.context());
  // In place when the caller passed its own slot of the output.
  uint8_t* slot = out + static_cast<size_t>(engine.rank()) * input.nbytes();
  if (input.data() != slot) opts.setInput(static_cast<uint8_t*>(input.data()), input.nbytes());
  opts.setOutput(out, input.nbytes() * static_cast<size_t>(engine.size()));
  opts.setTag(tagOf(info));
  opts.setTimeout(toChrono(timeout));
  ::gloo::allgather(opts);
}

// All-to-all over byte counts per rank.
void allToAllBytes(Engine& engine, uint8_t* out, std::vector<int64_t> out_bytes, uint8_t* in,
                   std::vector<int64_t> in_bytes, const CollectiveInfo& info,
                   absl::Duration timeout) {
  // Gloo wants real pointers even where nothing moves.
  uint8_t dummy = 0;
  if (in == nullptr) in = &dummy;
  if (out == nullptr) out = &dummy;
  const bool even = std::all_of(in_bytes.begin(), in_bytes.end(),
                                [&](int64_t b) { return b == in_bytes[0]; }) &&
                    std::all_of(out_bytes.begin(), out_bytes.end(),
                                [&](int64_t b) { return b == in_bytes[0]; });
  if (even) {
    if (in_bytes[0] == 0) return;
    ::gloo::AlltoallOptions opts(engine.context());
    opts.setInput(in, static_cast<size_t>(in_bytes[0]) * in_bytes.size());
    opts.setOutput(out, static_cast<size_t>(out_bytes[0]) * out_bytes.size());
    opts.setTag(tagOf(info));
    opts.setTimeout(toChrono(timeout));
    ::gloo::alltoall(opts);
    return;
  }
  ::gloo::AlltoallvOptions opts(engine.context());
  opts.setInput(in, std::move(in_bytes));
  opts.setOutput(out, std::move(out_bytes));
  opts.setTag(tagOf(info));
  opts.setTimeout(toChrono(timeout));
  ::gloo::alltoallv(opts);
}

// The calls: each runs on the worker as a closure over values and the
// engine it is handed, not over the backend.
class GlooBackend : public Backend {
 public:
  GlooBackend(const BackendContext& context,
              std::shared_ptr<::gloo::rendezvous::Context> gloo_context, PeerAddresses peers)
      : Backend(context),
        default_timeout_(context.timeout),
        engine_(std::make_shared<Engine>(std::move(gloo_context), std::move(peers))) {
    engine_->start();
  }

  ~GlooBackend() override { engine_->shutdown(); }

  std::string_view name() const override { return "gloo"; }

  WorkOr broadcast(Tensor tensor, const BroadcastOptions& options,
                   const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [tensor, options, info, timeout](Engine& e) -> absl::Status {
      if (tensor.nbytes() == 0) return absl::OkStatus();
      ::gloo::BroadcastOptions opts(e.context());
      opts.setOutput(static_cast<uint8_t*>(tensor.data()), tensor.nbytes());
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::broadcast(opts);
      return absl::OkStatus();
    }, /*settles=*/tensor.nbytes() > 0);
  }

  WorkOr allReduce(Tensor tensor, const AllReduceOptions& options,
                   const CollectiveInfo& info) override {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, tensor.dtype());
    if (!fn.ok()) return fn.status();
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [tensor, options, info, timeout, fn = *fn](Engine& e) {
      if (tensor.numel() == 0) return absl::OkStatus();
      ::gloo::AllreduceOptions opts(e.context());
      visitDType(tensor.dtype(), [&](auto tag) {
        using T = decltype(tag);
        opts.setOutput(static_cast<T*>(tensor.data()), static_cast<size_t>(tensor.numel()));
      });
      opts.setReduceFunction(fn);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::allreduce(opts);
      return finishAvg(options.op, tensor, e.size());
    }, /*settles=*/tensor.nbytes() > 0);
  }

  WorkOr reduce(Tensor tensor, const ReduceOptions& options, const CollectiveInfo& info) override {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, tensor.dtype());
    if (!fn.ok()) return fn.status();
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [tensor, options, info, timeout, fn = *fn](Engine& e) {
      if (tensor.numel() == 0) return absl::OkStatus();
      ::gloo::ReduceOptions opts(e.context());
      visitDType(tensor.dtype(), [&](auto tag) {
        using T = decltype(tag);
        opts.setOutput(static_cast<T*>(tensor.data()), static_cast<size_t>(tensor.numel()));
      });
      opts.setRoot(options.root);
      opts.setReduceFunction(fn);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::reduce(opts);
      return e.rank() == options.root ? finishAvg(options.op, tensor, e.size())
                                      : absl::OkStatus();
    }, /*settles=*/tensor.nbytes() > 0);
  }

  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options,
                   const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, input, info, timeout](Engine& e) {
      const bool direct = adjacent(outputs);
      uint8_t* out = direct ? static_cast<uint8_t*>(outputs[0].data())
                            : e.scratch(totalBytes(outputs));
      allGatherInto(e, out, input, info, timeout);
      if (!direct) unpack(out, outputs);
      return absl::OkStatus();
    }, /*settles=*/input.nbytes() > 0);
  }

  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                             const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [output, input, info, timeout](Engine& e) {
      allGatherInto(e, static_cast<uint8_t*>(output.data()), input, info, timeout);
      return absl::OkStatus();
    }, /*settles=*/input.nbytes() > 0);
  }

  WorkOr gather(std::vector<Tensor> outputs, Tensor input, const GatherOptions& options,
                const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, input, options, info, timeout](Engine& e) {
      if (input.nbytes() == 0) return absl::OkStatus();
      ::gloo::GatherOptions opts(e.context());
      opts.setInput(static_cast<uint8_t*>(input.data()), input.nbytes());
      const bool root = e.rank() == options.root;
      const bool direct = root && adjacent(outputs);
      uint8_t* out = nullptr;
      if (root) {
        out = direct ? static_cast<uint8_t*>(outputs[0].data()) : e.scratch(totalBytes(outputs));
        opts.setOutput(out, totalBytes(outputs));
      }
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::gather(opts);
      if (root && !direct) unpack(out, outputs);
      return absl::OkStatus();
    }, /*settles=*/input.nbytes() > 0);
  }

  WorkOr scatter(Tensor output, std::vector<Tensor> inputs, const ScatterOptions& options,
                 const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [output, inputs, options, info, timeout](Engine& e) {
      if (output.nbytes() == 0) return absl::OkStatus();
      ::gloo::ScatterOptions opts(e.context());
      if (e.rank() == options.root) {
        std::vector<uint8_t*> pointers;
        for (const Tensor& input : inputs) pointers.push_back(static_cast<uint8_t*>(input.data()));
        opts.setInputs(pointers, output.nbytes());
      }
      opts.setOutput(static_cast<uint8_t*>(output.data()), output.nbytes());
      opts.setRoot(options.root);
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::scatter(opts);
      return absl::OkStatus();
    }, /*settles=*/output.nbytes() > 0);
  }

  WorkOr reduceScatter(Tensor output, std::vector<Tensor> inputs,
                       const ReduceScatterOptions& options, const CollectiveInfo& info) override {
    return reduceScatterImpl(output, options, info,
                             [inputs](uint8_t* buffer) { pack(inputs, buffer); });
  }

  WorkOr reduceScatterTensor(Tensor output, Tensor input, const ReduceScatterOptions& options,
                             const CollectiveInfo& info) override {
    return reduceScatterImpl(output, options, info, [input](uint8_t* buffer) {
      std::memcpy(buffer, input.data(), input.nbytes());
    });
  }

  WorkOr allToAll(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                  const AllToAllOptions& options, const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [outputs, inputs, info, timeout](Engine& e) {
      std::vector<int64_t> in_bytes, out_bytes;
      for (const Tensor& t : inputs) in_bytes.push_back(static_cast<int64_t>(t.nbytes()));
      for (const Tensor& t : outputs) out_bytes.push_back(static_cast<int64_t>(t.nbytes()));
      const size_t in_total = totalBytes(inputs);
      const size_t out_total = totalBytes(outputs);
      const bool in_direct = adjacent(inputs);
      const bool out_direct = adjacent(outputs);
      uint8_t* scratch = e.scratch((in_direct ? 0 : in_total) + (out_direct ? 0 : out_total));
      uint8_t* in = in_direct ? static_cast<uint8_t*>(inputs[0].data()) : scratch;
      uint8_t* out = out_direct ? static_cast<uint8_t*>(outputs[0].data())
                                : scratch + (in_direct ? 0 : in_total);
      if (!in_direct) pack(inputs, in);
      allToAllBytes(e, out, std::move(out_bytes), in, std::move(in_bytes), info, timeout);
      if (!out_direct) unpack(out, outputs);
      return absl::OkStatus();
    }, /*settles=*/false);
  }

  WorkOr allToAllSingle(Tensor output, Tensor input, std::vector<int64_t> output_splits,
                        std::vector<int64_t> input_splits, const AllToAllOptions& options,
                        const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    // Rows of dim 0; the front end checked that both tensors have rows of
    // the same size.
    const int64_t rows = input.shape().empty() ? 0 : input.shape()[0];
    const int64_t row_bytes = rows == 0 ? 0 : static_cast<int64_t>(input.nbytes()) / rows;
    for (int64_t& split : output_splits) split *= row_bytes;
    for (int64_t& split : input_splits) split *= row_bytes;
    return submit(info, timeout,
                  [output, input, output_splits, input_splits, info, timeout](Engine& e) {
                    allToAllBytes(e, static_cast<uint8_t*>(output.data()), output_splits,
                                  static_cast<uint8_t*>(input.data()), input_splits, info,
                                  timeout);
                    return absl::OkStatus();
                  },
                  /*settles=*/false);
  }

  WorkOr barrier(const BarrierOptions& options, const CollectiveInfo& info) override {
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [info, timeout](Engine& e) {
      ::gloo::BarrierOptions opts(e.context());
      opts.setTag(tagOf(info));
      opts.setTimeout(toChrono(timeout));
      ::gloo::barrier(opts);
      return absl::OkStatus();
    }, /*settles=*/true);
  }

  WorkOr send(Tensor tensor, int dst, const P2POptions& options,
              const CollectiveInfo& info) override {
    return transfer(tensor, dst, options, info, /*is_send=*/true);
  }

  WorkOr recv(Tensor tensor, int src, const P2POptions& options,
              const CollectiveInfo& info) override {
    return transfer(tensor, src, options, info, /*is_send=*/false);
  }

  void abort() override {
    engine_->abort(makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                             absl::StrCat("group ", groupName(), " was aborted")));
  }

 private:
  absl::Duration timeoutOf(const std::optional<absl::Duration>& timeout) const {
    return timeout.value_or(default_timeout_);
  }

  // `settles`: whether the call is sure to exchange messages with every
  // peer (see Engine::markUnsettled); all-to-all may skip peers it sends
  // nothing to.
  WorkOr submit(const CollectiveInfo& info, absl::Duration timeout,
                std::function<absl::Status(Engine&)> run, bool settles) {
    auto work = std::make_shared<GlooWork>(info, timeout, engine_);
    if (absl::Status status = engine_->enqueue(work, std::move(run), settles); !status.ok()) {
      return status;
    }
    return work;
  }

  // Gloo's ReduceScatterHalvingDoubling: `fill` copies the input into the
  // plan's buffer (the algorithm reduces in place, and the caller's input
  // must stay intact), then this rank's chunk is copied out.
  WorkOr reduceScatterImpl(Tensor output, const ReduceScatterOptions& options,
                           const CollectiveInfo& info, std::function<void(uint8_t*)> fill) {
    absl::StatusOr<ReduceFn> fn = reduceFunction(options.op, output.dtype());
    if (!fn.ok()) return fn.status();
    const int64_t count = output.numel() * size();
    // The algorithm counts elements and bytes in int.
    if (static_cast<uint64_t>(count) * dtypeSize(output.dtype()) > 0x7fffffffu) {
      return invalidArgumentError(absl::StrCat(
          info.describe(), ": gloo's reduce-scatter handles inputs below 2 GiB; this one is ",
          static_cast<uint64_t>(count) * dtypeSize(output.dtype()),
          " bytes; split it into several calls"));
    }
    const auto timeout = timeoutOf(options.timeout);
    return submit(info, timeout, [output, options, count, fill = std::move(fill)](Engine& e) {
      if (count == 0) return absl::OkStatus();
      ReduceScatterPlan& plan =
          e.reduceScatterPlan(output.dtype(), options.op, static_cast<int>(count));
      fill(static_cast<uint8_t*>(plan.buffer()));
      e.markUnsettled();
      plan.run();
      std::memcpy(output.data(), plan.buffer(), output.nbytes());
      return finishAvg(options.op, output, e.size());
    }, /*settles=*/false);
  }

  // Posts the transfer at once (so a batch of sends and receives cannot
  // deadlock behind each other) and waits for it on the waiter pool.
  WorkOr transfer(const Tensor& tensor, int peer, const P2POptions& options,
                  const CollectiveInfo& info, bool is_send) {
    if (absl::Status status = engine_->usable(info); !status.ok()) return status;
    const absl::Duration timeout = timeoutOf(options.timeout);
    // Gloo wants a real pointer even for an empty tensor.
    static uint8_t empty = 0;
    void* data = tensor.nbytes() == 0 ? &empty : tensor.data();
    std::shared_ptr<TransferWork> work;
    try {
      work = std::make_shared<TransferWork>(
          info, timeout, engine_->context()->createUnboundBuffer(data, tensor.nbytes()), is_send);
      const uint64_t slot = ::gloo::Slot::build(kSendRecvSlotPrefix, options.tag);
      if (is_send) {
        work->buffer().send(peer, slot);
      } else {
        work->buffer().recv(peer, slot);
      }
    } catch (const ::gloo::IoException& e) {
      return engineError(info, e.what(), /*io=*/true, engine_->peers());
    } catch (const std::exception& e) {
      return engineError(info, e.what(), /*io=*/false, engine_->peers());
    }
    TransferWork* raw = work.get();
    engine_->awaitTransfer(work, [raw, is_send, timeout, info](Engine&) -> absl::Status {
      const bool done = is_send ? raw->buffer().waitSend(nullptr, toChrono(timeout))
                                : raw->buffer().waitRecv(nullptr, toChrono(timeout));
      if (done) return absl::OkStatus();
      return makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                       absl::StrCat(info.describe(), " was aborted"));
    });
    return work;
  }

  const absl::Duration default_timeout_;
  const std::shared_ptr<Engine> engine_;
};

}  // namespace

GlooBackendOptions glooOptionsFromEnv(
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  auto read = [&](const std::string& name) -> std::optional<std::string> {
    if (getenv) return getenv(name);
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  };
  GlooBackendOptions options;
  if (std::optional<std::string> iface = read("LOOM_GLOO_IFACE"); iface && !iface->empty()) {
    options.iface = *iface;
  } else if (std::optional<std::string> host = read("LOOM_GLOO_HOSTNAME"); host && !host->empty()) {
    options.hostname = *host;
  } else if (std::optional<std::string> master = read("MASTER_ADDR"); master && !master->empty()) {
    if (std::optional<std::string> local = localAddressToward(*master)) options.hostname = *local;
  }
  return options;
}

namespace {

// "[ip]:port" as Gloo prints socket addresses, or "" for other families.
std::string glooAddressText(const sockaddr_storage& address) {
  const auto ip = ipAndPort(address);
  return ip ? absl::StrCat("[", ip->first, "]:", ip->second) : std::string();
}

// The local address of every connected TCP socket of this process. Gloo
// keeps the listening address as a pair's own address on the side that
// connected, while the accepting side sees the connecting socket's
// ephemeral port in its errors; only the socket itself knows that port.
std::vector<std::string> connectedTcpSocketAddresses() {
  std::vector<std::string> addresses;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return addresses;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(dir)) continue;
    int type = 0;
    socklen_t type_length = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) {
      continue;
    }
    sockaddr_storage local{}, remote{};
    socklen_t local_length = sizeof(local), remote_length = sizeof(remote);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0) {
      continue;
    }
    if (std::string text = glooAddressText(local); !text.empty()) addresses.push_back(text);
  }
  closedir(dir);
  return addresses;
}

// The listening addresses this rank's pairs had before they connected,
// which the peers keep as the pairs' remote address: Gloo's full-mesh
// rendezvous stored them under the key "<rank>", one serialized tcp::Address
// per peer.
std::vector<std::string> preConnectionAddresses(::gloo::rendezvous::Context& context,
                                                Store& store) {
  std::vector<std::string> addresses;
  if (context.size < 2) return addresses;
  const size_t chunk = context.getPair(context.rank == 0 ? 1 : 0)->address().bytes().size();
  absl::StatusOr<Bytes> blob = store.get(absl::StrCat(context.rank));
  if (!blob.ok() || chunk == 0 || blob->size() % chunk != 0) return addresses;
  for (size_t at = 0; at < blob->size(); at += chunk) {
    const std::vector<char> bytes(blob->begin() + at, blob->begin() + at + chunk);
    addresses.push_back(::gloo::transport::tcp::Address(bytes).str());
  }
  return addresses;
}

// Publishes every address by which this rank's connections may appear in
// its peers' errors, and reads everyone else's (see PeerAddresses). Gloo
// names a peer by whichever it holds: the address the peer's pair listened
// on, the pair's address once connected, or the peer socket's own address
// (an ephemeral port on the side that connected). The blob is smaller than
// the one Gloo's own full-mesh rendezvous exchanges.
absl::StatusOr<PeerAddresses> exchangePeerAddresses(::gloo::rendezvous::Context& context,
                                                    Store& store) {
  constexpr char kKey[] = "gloo_socket_addresses/";
  std::vector<std::string> own = connectedTcpSocketAddresses();
  for (std::string& address : preConnectionAddresses(context, store)) {
    own.push_back(std::move(address));
  }
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer != context.rank) own.push_back(context.getPair(peer)->address().str());
  }
  std::sort(own.begin(), own.end());
  own.erase(std::unique(own.begin(), own.end()), own.end());
  const std::string mine = absl::StrJoin(own, " ");
  if (absl::Status s = store.set(absl::StrCat(kKey, context.rank), Bytes(mine.begin(), mine.end()));
      !s.ok()) {
    return s;
  }
  PeerAddresses peers;
  for (int peer = 0; peer < context.size; ++peer) {
    if (peer == context.rank) continue;
    absl::StatusOr<Bytes> theirs = store.get(absl::StrCat(kKey, peer));
    if (!theirs.ok()) return theirs.status();
    const std::string text(theirs->begin(), theirs->end());
    for (absl::string_view address : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      peers.emplace(std::string(address), peer);
    }
  }
  return peers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> createGlooBackend(const BackendContext& context,
                                                           const GlooBackendOptions& options) {
  ignoreSigpipe();
  const std::string who = absl::StrCat("gloo backend of group ", context.group_name, " (rank ",
                                       context.rank, " of ", context.size, ")");
  ::gloo::transport::tcp::attr attr;
  if (!options.iface.empty()) {
    attr.iface = options.iface;
  } else {
    attr.hostname = options.hostname;
  }
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return invalidArgumentError(absl::StrCat(
        who, " cannot listen on ",
        options.iface.empty() ? "host " + options.hostname : "interface " + options.iface, ": ",
        e.what(), "; set LOOM_GLOO_IFACE or LOOM_GLOO_HOSTNAME to an address of this machine"));
  }
  auto gloo_context = std::make_shared<::gloo::rendezvous::Context>(context.rank, context.size);
  gloo_context->setTimeout(toChrono(context.timeout));
  GlooStore store(context.store, context.timeout);
  try {
    gloo_context->connectFullMesh(store, device);
  } catch (const StoreFailure& e) {
    return withContext(e.status(),
                       absl::StrCat(who, " could not meet its peers (each rank publishes its "
                                         "address under its rank number): "));
  } catch (const std::exception& e) {
    return networkError(absl::StrCat(who, " could not connect to its peers within ",
                                     absl::FormatDuration(context.timeout), ": ", e.what()));
  }
  absl::StatusOr<PeerAddresses> peers = exchangePeerAddresses(*gloo_context, *context.store);
  if (!peers.ok()) {
    return withContext(peers.status(), absl::StrCat(who, " could not exchange the addresses "
                                                         "of its connections: "));
  }
  return std::unique_ptr<Backend>(
      new GlooBackend(context, std::move(gloo_context), *std::move(peers)));
}

void registerGlooBackend() {
  registerBackend("gloo", {Device::Type::kCpu}, [](const BackendContext& context) {
    return createGlooBackend(context, glooOptionsFromEnv());
  });
}

}  // namespace loom::comm::gloo
