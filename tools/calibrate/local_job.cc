// Runs local ranks through the job launcher within a deadline (local_job.h).
#include "tools/calibrate/local_job.h"

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace loom::calibrate {
namespace {

bool isExecutable(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string dirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> selfExecutable() {
  char buffer[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) {
    return absl::InternalError(absl::StrCat("cannot read /proc/self/exe: ", std::strerror(errno)));
  }
  return std::string(buffer, n);
}

absl::StatusOr<std::string> findLauncher(const std::string& flag_value, const std::string& argv0) {
  if (!flag_value.empty()) {
    if (isExecutable(flag_value)) return flag_value;
    return absl::NotFoundError(absl::StrCat("--launch=", flag_value,
                                            " is not an executable file; build //tools:launch "
                                            "and pass its path"));
  }
  constexpr char kRelative[] = "loom/tools/launch/launch";
  std::vector<std::string> tried;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(env); dir != nullptr && *dir != '\0') {
      tried.push_back(absl::StrCat(dir, "/", kRelative));
    }
  }
  tried.push_back(absl::StrCat(argv0, ".runfiles/", kRelative));
  if (absl::StatusOr<std::string> self = selfExecutable(); self.ok()) {
    tried.push_back(absl::StrCat(dirName(*self), "/../launch/launch"));
  }
  for (const std::string& path : tried) {
    if (isExecutable(path)) return path;
  }
  return absl::NotFoundError(absl::StrCat("cannot find the launcher (tried ",
                                          absl::StrJoin(tried, ", "),
                                          "); run through `bazel run //tools:calibrate` or pass "
                                          "--launch=bazel-bin/tools/launch/launch"));
}

absl::Status runLocalJob(const LocalJob& job) {
  std::vector<std::string> args = {
      job.launcher, absl::StrCat("--nproc=", job.nproc),
      absl::StrCat("--timeout=", absl::ToInt64Seconds(job.timeout), "s"), "--no_prefix", "--"};
  args.insert(args.end(), job.command.begin(), job.command.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (int err = ::posix_spawn(&pid, job.launcher.c_str(), nullptr, nullptr, argv.data(), environ);
      err != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the launcher '", job.launcher, "': ", std::strerror(err)));
  }
  // The launcher enforces the job's timeout; this bound only catches a
  // launcher that itself hangs.
  const absl::Time deadline = absl::Now() + job.timeout + absl::Seconds(30);
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid on the launcher: ", std::strerror(errno)));
    }
    if (absl::Now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return absl::DeadlineExceededError(
          absl::StrCat("the launcher of ", job.nproc, " ranks did not end within ",
                       absl::FormatDuration(job.timeout), " + 30s and was killed"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  const std::string how = WIFEXITED(status)
                              ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::AbortedError(absl::StrCat(
      "the ", job.nproc, "-rank collective job ", how,
      " (its ranks' messages are above); try fewer --group_sizes or a larger --timeout_s"));
}

}  // namespace loom::calibrate
