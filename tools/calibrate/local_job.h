// Starts N local ranks of a command through the job launcher
// (//tools:launch, docs/launch.md) and waits for them within a deadline, so
// calibrate measures collectives between real processes exactly as
// comm-bench runs.
#ifndef LOOM_TOOLS_CALIBRATE_LOCAL_JOB_H_
#define LOOM_TOOLS_CALIBRATE_LOCAL_JOB_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace loom::calibrate {

// This process's own binary (/proc/self/exe, resolved).
absl::StatusOr<std::string> selfExecutable();

// The launcher: `flag_value` when given, else tools/launch/launch in this
// binary's runfiles (RUNFILES_DIR, TEST_SRCDIR, <argv0>.runfiles) or next
// to it in bazel-bin. The error lists the places tried.
absl::StatusOr<std::string> findLauncher(const std::string& flag_value, const std::string& argv0);

struct LocalJob {
  std::string launcher;
  int nproc = 1;
  std::vector<std::string> command;  // binary and its arguments
  // The launcher stops the ranks after this (--timeout); the launcher
  // itself is killed if it is still there 30 s later.
  absl::Duration timeout = absl::Minutes(5);
};

// Runs `launcher --nproc=N --timeout=T --no_prefix -- command...` with this
// process's stdout and stderr, and waits. Fails with the launcher's exit
// code when the job does not succeed.
absl::Status runLocalJob(const LocalJob& job);

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_LOCAL_JOB_H_
