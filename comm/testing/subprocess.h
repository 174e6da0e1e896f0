// Test support for multi-process tests: starts helper binaries from the
// test's runfiles, reads their output and reaps them within a deadline.
#ifndef LOOM_COMM_TESTING_SUBPROCESS_H_
#define LOOM_COMM_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom::comm::testing {

// The path of a binary that the test lists in `data`, e.g.
// runfilePath("comm/store_test_helper").
std::string runfilePath(const std::string& relative);

// Reaps child `pid` by `deadline`, polling waitpid(WNOHANG) with a back-off
// from 1 to 20 ms: its exit code, or 128 + the signal that ended it.
// DeadlineExceeded when it still runs at the deadline (the caller decides
// what to do with it), Internal when waitpid fails.
absl::StatusOr<int> reapBy(pid_t pid, absl::Time deadline);

// A started child process. Its stdout is a pipe the test can read; its stdin
// is a pipe whose closing tells a well-behaved helper to exit. Destroying a
// Subprocess that is still running kills it.
class Subprocess {
 public:
  // Starts `binary` with `args`, adding `env` ("NAME=value") to a copy of
  // this process's environment.
  static absl::StatusOr<Subprocess> start(const std::string& binary,
                                          const std::vector<std::string>& args,
                                          const std::vector<std::string>& env = {});

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }

  // The next line of the child's stdout, without the newline.
  absl::StatusOr<std::string> readLine(absl::Duration timeout);
  // Closes the child's stdin.
  void closeStdin();
  // Sends SIGKILL.
  void kill();
  // Waits for the child to exit and returns its exit code (128 + signal if
  // it was killed); kills it and fails if it outlives `timeout`.
  absl::StatusOr<int> wait(absl::Duration timeout);

 private:
  Subprocess(pid_t pid, int stdin_fd, int stdout_fd)
      : pid_(pid), stdin_fd_(stdin_fd), stdout_fd_(stdout_fd) {}
  void release();

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

}  // namespace loom::comm::testing

#endif  // LOOM_COMM_TESTING_SUBPROCESS_H_
