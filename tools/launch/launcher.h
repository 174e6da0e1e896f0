// Runs one machine's ranks of a job as child processes, as torchrun does:
// gives each its rank environment, prefixes its output, and when one rank
// fails (or the job times out, or the launcher is signalled) stops the rest
// within a bounded time and says which rank ended the job and how.
#ifndef LOOM_TOOLS_LAUNCH_LAUNCHER_H_
#define LOOM_TOOLS_LAUNCH_LAUNCHER_H_

#include <sys/types.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom::launch {

// The environment variable that carries the job's store token to every rank;
// comm's TCPStore rejects clients that do not present it.
inline constexpr char kStoreTokenEnv[] = "LOOM_STORE_TOKEN";

// Exit code of a job stopped by LaunchOptions::timeout, as timeout(1) uses.
inline constexpr int kTimeoutExitCode = 124;

struct LaunchOptions {
  // The program every rank runs, a path or a name looked up on PATH, and
  // its arguments.
  std::string binary;
  std::vector<std::string> args;
  // This machine starts `nproc` ranks; the job has nnodes * nproc ranks and
  // this machine's are node_rank * nproc + [0, nproc).
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  // Where rank 0 serves the job's store. Port 0 picks a free port; only a
  // single-machine job may do that, because every machine must give its
  // ranks the same port.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // The store token (kStoreTokenEnv). Empty picks a random one; a job over
  // several machines must pass the one they all share.
  std::string token;
  // After the first SIGTERM, how long ranks may take to exit before they
  // get SIGKILL.
  absl::Duration grace_period = absl::Seconds(5);
  // Limit on the whole job; when it passes, the running ranks are stopped.
  absl::Duration timeout = absl::InfiniteDuration();
  // Prefix every line of a rank's stdout and stderr with "[rank R] ". When
  // false the ranks write straight to stdout_fd and stderr_fd.
  bool prefix_output = true;
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
};

enum class JobEnd {
  kSucceeded,    // every rank exited with status 0
  kRankFailed,   // a rank exited non-zero or was killed by a signal
  kTimedOut,     // LaunchOptions::timeout passed
  kInterrupted,  // the launcher received SIGINT, SIGTERM or SIGHUP
};

struct RankOutcome {
  int rank = 0;  // in the whole job
  int local_rank = 0;
  pid_t pid = -1;
  // How the process ended: its exit status, or the signal that killed it.
  // Both are empty only for a process still alive after SIGKILL (stuck in
  // the kernel), which the launcher gives up on.
  std::optional<int> exit_code;
  std::optional<int> term_signal;
  // The launcher stopped it: it was still running when the job ended.
  bool stopped = false;
  // It did not exit within the grace period (or a second stop signal came)
  // and was sent SIGKILL.
  bool killed = false;
};

struct LaunchResult {
  JobEnd end = JobEnd::kSucceeded;
  // Indexed by local rank.
  std::vector<RankOutcome> ranks;
  // For kRankFailed, the rank whose failure ended the job.
  std::optional<int> failed_rank;
  // The port the ranks were given as MASTER_PORT.
  int master_port = 0;
  // What the launcher should exit with: 0; the failed rank's exit status,
  // or 128 + the signal that killed it; kTimeoutExitCode; or 128 + the
  // signal the launcher received.
  int exit_code = 0;
  // One line saying how a job that did not succeed ended, e.g. "rank 2
  // (pid 1234) exited with status 3; stopped ranks 0,1,3"; empty on success.
  std::string message;
};

// Starts the ranks, forwards their output and waits for them. While it runs
// it handles SIGINT, SIGTERM, SIGHUP (passing them on to the ranks), SIGCHLD
// and SIGPIPE, restoring the previous handlers before it returns; one call
// at a time per process, and nothing else in the process may reap children
// with wait(-1) meanwhile. Each rank runs in its own process group, which is
// what gets signalled, so a rank's own children are stopped with it; when
// the job ends, whatever is left in those groups is killed.
//
// Errors are for jobs that could not start (bad options, a missing or
// non-executable binary, no free port); the ranks already started are
// killed first. A job that started returns a LaunchResult however it ended.
absl::StatusOr<LaunchResult> runLocalJob(const LaunchOptions& options);

}  // namespace loom::launch

#endif  // LOOM_TOOLS_LAUNCH_LAUNCHER_H_
