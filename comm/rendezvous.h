// Rendezvous: turns an init method URL (env://, tcp://host:port, file:///path)
// into a store shared by all ranks plus this process's rank and the world
// size, after torch.distributed.init_process_group's init methods.
#ifndef LOOM_COMM_RENDEZVOUS_H_
#define LOOM_COMM_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store.h"

namespace loom::comm {

struct RendezvousOptions {
  // Rank and world size when the URL (or, for env://, the environment) does
  // not carry them; if both give one, they must agree.
  std::optional<int> rank;
  std::optional<int> world_size;
  // Bounds the whole rendezvous, connecting included, and becomes the
  // store's default timeout.
  absl::Duration timeout = kDefaultStoreTimeout;
  // The job's TCPStore token; when empty, LOOM_STORE_TOKEN is used.
  std::string token;
  // Reads an environment variable; empty means the process environment.
  // Launchers and tests that run ranks as threads pass their own.
  std::function<std::optional<std::string>(const std::string&)> getenv;
};

struct RendezvousResult {
  std::shared_ptr<Store> store;
  int rank = 0;
  int world_size = 0;
  // LOCAL_RANK, when the launcher set it (env:// only).
  std::optional<int> local_rank;
};

// Joins the rendezvous named by `url`:
//   env://                         MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
//                                  (and LOCAL_RANK), as torchrun sets them
//   tcp://host:port?rank=R&world_size=W
//   file:///path?rank=R&world_size=W
// For env:// and tcp://, rank 0 runs the TCPStore server on host:port and
// the others connect to it. Returns once every rank has arrived. Errors name
// the field or rank at fault: a missing or malformed field (invalid
// argument), ranks that disagree on the world size or claim the same rank
// (store error), and ranks that never arrive (timeout, listing them).
absl::StatusOr<RendezvousResult> rendezvous(const std::string& url,
                                            const RendezvousOptions& options = {});

}  // namespace loom::comm

#endif  // LOOM_COMM_RENDEZVOUS_H_
