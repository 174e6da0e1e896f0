// Test support for the fault-injection tests: starts a binary from the
// runfiles as its own process group, follows its merged stdout/stderr line
// by line with deadlines, signals it, reaps it, and tells whether anything
// it started is still alive.
#ifndef LOOM_TESTS_FAULT_FAULT_PROCESS_H_
#define LOOM_TESTS_FAULT_FAULT_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom::fault {

// The path of a file the test lists in `data`, e.g.
// runfilePath("tests/fault/fault_rank").
std::string runfilePath(const std::string& relative);

// A child process leading its own process group. It gets SIGKILL if the
// test process dies (PR_SET_PDEATHSIG), and destroying a FaultProcess kills
// its whole group, so no test leaves processes behind even when it fails.
class FaultProcess {
 public:
  // Starts `argv[0]` with the rest of `argv`, adding `env` ("NAME=value") to
  // a copy of this process's environment. Its stdout and stderr go to one
  // pipe that the test reads; its stdin is a pipe the test may close.
  static absl::StatusOr<FaultProcess> start(const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env = {});

  FaultProcess(FaultProcess&& other) noexcept;
  FaultProcess& operator=(FaultProcess&& other) noexcept;
  ~FaultProcess();

  pid_t pid() const { return pid_; }

  // The next output line for which `match` is true (earlier lines are kept
  // in the transcript only), waiting until `deadline`.
  absl::StatusOr<std::string> awaitLine(const std::function<bool(const std::string&)>& match,
                                        absl::Time deadline);
  // The next line that starts with `prefix`.
  absl::StatusOr<std::string> awaitPrefix(const std::string& prefix, absl::Time deadline);
  // Everything the process wrote so far (reads what is available now).
  std::string transcript();

  void closeStdin();
  // Signals the process, or its whole process group.
  void signal(int sig);
  void signalGroup(int sig);
  // Waits for the process to exit; returns its exit code, or 128 + the
  // signal that killed it. Kills the group and fails if it outlives
  // `deadline`.
  absl::StatusOr<int> wait(absl::Time deadline);
  // Whether no process is left in the process group this one led (call
  // after wait()). Processes that moved to a group of their own are not
  // seen; the ranks the tests start do not.
  bool groupGone() const;

 private:
  FaultProcess(pid_t pid, int stdin_fd, int output_fd)
      : pid_(pid), pgid_(pid), stdin_fd_(stdin_fd), output_fd_(output_fd) {}
  // Reads what is available, waiting until `deadline`; false at EOF.
  bool readMore(absl::Time deadline);
  void release();

  pid_t pid_ = -1;
  pid_t pgid_ = -1;
  int stdin_fd_ = -1;
  int output_fd_ = -1;
  std::string all_;
  size_t consumed_ = 0;
};

// Seconds with millisecond precision, for time-to-error reports.
double seconds(absl::Duration duration);

// Prints one row of the time-to-error table that docs/reliability.md
// records: `TIMING | scenario | timeout | time-to-error | excerpt |`.
void reportTiming(const std::string& scenario, absl::Duration timeout, absl::Duration time_to_error,
                  const std::string& excerpt);

}  // namespace loom::fault

#endif  // LOOM_TESTS_FAULT_FAULT_PROCESS_H_
