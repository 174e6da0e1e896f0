// A multi-process job of fault_rank processes for the fault-injection tests:
// serves the job's TCPStore (in this process, or in a separate process that
// a test can kill), starts the ranks, and collects what each reports.
#ifndef LOOM_TESTS_FAULT_FAULT_JOB_H_
#define LOOM_TESTS_FAULT_FAULT_JOB_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/tcp_store.h"
#include "tests/fault/fault_process.h"

namespace loom::fault {

// What one rank reported when its call failed: "error kind=K after_ms=T M".
struct RankError {
  std::string kind;
  absl::Duration after;
  std::string message;
  // When the test read the line.
  absl::Time seen;
};

// Parses an "error ..." line of fault_rank.
absl::StatusOr<RankError> parseRankError(const std::string& line);

class FaultJob {
 public:
  // Where the job's store runs: in the test process, or in a child process
  // (fault_rank --scenario=serve) that the test can kill.
  enum class StoreHost { kTest, kChild };

  // `store_flags` go to a child store (e.g. --handshake_timeout_ms=2000).
  explicit FaultJob(StoreHost host = StoreHost::kTest, const std::string& token = "",
                    const std::vector<std::string>& store_flags = {});

  // Whether the store is up; tests ASSERT on it first.
  bool ok() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  FaultProcess* storeProcess() { return store_process_.has_value() ? &*store_process_ : nullptr; }
  // Stops an in-process store server.
  void stopStore() { server_.reset(); }

  // Starts `size` ranks of fault_rank with --store=tcp:PORT, --rank, --size
  // and `flags`, and waits until every one has reported "ready".
  absl::Status start(int size, const std::vector<std::string>& flags,
                     const std::vector<std::string>& env = {});

  FaultProcess& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(ranks_.size()); }

  // Waits for rank r's "error" line; fails if it reports "done" instead or
  // nothing before the deadline.
  absl::StatusOr<RankError> awaitError(int r, absl::Time deadline);
  // Closes every rank's stdin (releasing --hold, which also ends a loop) and
  // reaps all of them;
  // returns each exit code (-1 if it had to be killed).
  std::vector<int> finish(absl::Time deadline);
  // Whether every process of the job (ranks and a child store) is gone.
  bool nothingLeft() const;

 private:
  std::unique_ptr<comm::TCPStore> server_;
  std::optional<FaultProcess> store_process_;
  uint16_t port_ = 0;
  std::vector<FaultProcess> ranks_;
};

}  // namespace loom::fault

#endif  // LOOM_TESTS_FAULT_FAULT_JOB_H_
