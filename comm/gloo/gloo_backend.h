// Backend "gloo": collectives on CPU tensors through Debian's libgloo over
// its TCP transport, meeting peers through the group's Store. Calls run in
// issue order on one worker thread per group (c10d's ProcessGroupGloo
// design); docs/comm.md has the algorithm used for each call.
#ifndef LOOM_COMM_GLOO_GLOO_BACKEND_H_
#define LOOM_COMM_GLOO_GLOO_BACKEND_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "comm/backend.h"

namespace loom::comm::gloo {

// The largest all_reduce the two-round algorithm takes by default. It was
// faster than the ring at every size measured up to here
// (docs/comm_bench.md), but it needs scratch the size of the call, which the
// group keeps, where the ring needs two segments of at most 1 MiB.
inline constexpr size_t kDefaultDirectAllReduceMaxBytes = size_t{64} << 20;

// Where this rank's Gloo device listens, and the all-reduce's algorithm by
// size.
struct GlooBackendOptions {
  // A network interface ("eth0") whose address to use; wins over hostname.
  std::string iface;
  // A host name or address of this machine.
  std::string hostname = "127.0.0.1";
  // all_reduce of at most this many bytes runs directAllReduce (two rounds
  // of direct messages, direct_all_reduce.h), larger ones Gloo's ring; both
  // give the same bits.
  size_t direct_all_reduce_max_bytes = kDefaultDirectAllReduceMaxBytes;
};

// The options for this process: LOOM_GLOO_IFACE, else GLOO_SOCKET_IFNAME
// (PyTorch's variable: an interface or a comma-separated list, whose entries
// successive calls, one per group created, take in turn), else
// LOOM_GLOO_HOSTNAME, else the local address that routes to MASTER_ADDR (so
// a multi-host job needs no setting), else 127.0.0.1. `getenv` may be empty
// (the process environment).
GlooBackendOptions glooOptionsFromEnv(
    const std::function<std::optional<std::string>(const std::string&)>& getenv = {});

// Connects to the group's other ranks (every rank calls this with the same
// context) and starts the worker. Fails with a timeout error naming the
// store keys of ranks that never arrived, or a network error.
absl::StatusOr<std::unique_ptr<Backend>> createGlooBackend(const BackendContext& context,
                                                           const GlooBackendOptions& options);

// Registers "gloo" for CPU tensors, with glooOptionsFromEnv() read at each
// creation.
void registerGlooBackend();

}  // namespace loom::comm::gloo

#endif  // LOOM_COMM_GLOO_GLOO_BACKEND_H_
