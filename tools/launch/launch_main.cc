// launch: starts N local ranks of a program, torchrun-style, and ends the job
// with a message naming the rank that failed.
//
//   bazel run //tools:launch -- --nproc=4 -- /path/to/binary args...
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/launch/launcher.h"

ABSL_FLAG(int, nproc, 1, "ranks to start on this machine");
ABSL_FLAG(int, nnodes, 1, "machines in the job, each running its own launcher");
ABSL_FLAG(int, node_rank, 0, "this machine's index in [0, nnodes)");
ABSL_FLAG(std::string, master_addr, "127.0.0.1", "host of rank 0, where the job's store listens");
ABSL_FLAG(int, master_port, 0, "port of the job's store; 0 picks a free one (one machine only)");
ABSL_FLAG(absl::Duration, grace_period, absl::Seconds(5),
          "how long ranks may take to exit after SIGTERM before SIGKILL");
ABSL_FLAG(absl::Duration, timeout, absl::InfiniteDuration(),
          "limit on the whole job, e.g. 30m; when it passes the ranks are "
          "stopped and the launcher exits 124");
ABSL_FLAG(bool, no_prefix, false,
          "let ranks write straight to stdout/stderr instead of prefixing "
          "each line with [rank R]");

namespace {

int fail(const absl::Status& status) {
  std::fprintf(stderr, "launch: %s\n", std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "starts --nproc ranks of a program with RANK, LOCAL_RANK, WORLD_SIZE,\n"
      "MASTER_ADDR, MASTER_PORT and LOOM_STORE_TOKEN set; stops them all\n"
      "when one fails. See docs/launch.md.\n"
      "  launch --nproc=4 -- /path/to/binary args...");
  // The launcher's flags end at "--"; everything after it is the rank
  // command, whose own flags absl must not see.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  std::vector<char*> positional = absl::ParseCommandLine(split, argv);
  std::vector<std::string> command;
  if (split < argc) {
    if (positional.size() > 1) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", positional[1],
                       "' before '--'; launcher flags look like --nproc=4")));
    }
    command.assign(argv + split + 1, argv + argc);
  } else {
    command.assign(positional.begin() + 1, positional.end());
  }
  // Under `bazel run` the launcher starts in its runfiles; relative paths on
  // the command line, and the ranks, belong in the user's directory.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
      dir != nullptr && ::chdir(dir) != 0) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "cannot change to BUILD_WORKING_DIRECTORY '", dir, "': ", std::strerror(errno))));
  }

  loom::launch::LaunchOptions options;
  if (!command.empty()) {
    options.binary = command.front();
    options.args.assign(command.begin() + 1, command.end());
  }
  options.nproc = absl::GetFlag(FLAGS_nproc);
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.grace_period = absl::GetFlag(FLAGS_grace_period);
  options.timeout = absl::GetFlag(FLAGS_timeout);
  options.prefix_output = !absl::GetFlag(FLAGS_no_prefix);
  // Machines of one job share a token by exporting it; a launch on its own
  // gets a fresh random one.
  if (const char* token = std::getenv(loom::launch::kStoreTokenEnv)) {
    options.token = token;
  }

  absl::StatusOr<loom::launch::LaunchResult> result = loom::launch::runLocalJob(options);
  if (!result.ok()) return fail(result.status());
  if (!result->message.empty()) {
    std::fprintf(stderr, "launch: %s\n", result->message.c_str());
  }
  return result->exit_code;
}
