// Implements FaultProcess with fork/exec. Everything the child needs is
// prepared before fork(), since the test process runs threads and the child
// may then only make async-signal-safe calls.
#include "tests/fault/fault_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "comm/testing/subprocess.h"

extern char** environ;

namespace loom::fault {

std::string runfilePath(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return relative;
  return absl::StrCat(srcdir, "/", workspace, "/", relative);
}

absl::StatusOr<FaultProcess> FaultProcess::start(const std::vector<std::string>& argv,
                                                 const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("no command to start");
  std::vector<std::string> argv_storage = argv;
  std::vector<char*> args;
  for (std::string& arg : argv_storage) args.push_back(arg.data());
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** entry = environ; *entry != nullptr; ++entry) env_storage.emplace_back(*entry);
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();

  int to_child[2];
  int from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(to_child[0]);
    ::close(to_child[1]);
    ::close(from_child[0]);
    ::close(from_child[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Dies with the test, even if the test is SIGKILLed by Bazel's timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    ::dup2(from_child[1], STDERR_FILENO);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  // Also from the parent, so the group exists before anyone signals it.
  ::setpgid(pid, pid);
  ::close(to_child[0]);
  ::close(from_child[1]);
  return FaultProcess(pid, to_child[1], from_child[0]);
}

FaultProcess::FaultProcess(FaultProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pgid_(std::exchange(other.pgid_, -1)),
      stdin_fd_(std::exchange(other.stdin_fd_, -1)),
      output_fd_(std::exchange(other.output_fd_, -1)),
      all_(std::move(other.all_)),
      consumed_(other.consumed_) {}

FaultProcess& FaultProcess::operator=(FaultProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    pgid_ = std::exchange(other.pgid_, -1);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    output_fd_ = std::exchange(other.output_fd_, -1);
    all_ = std::move(other.all_);
    consumed_ = other.consumed_;
  }
  return *this;
}

FaultProcess::~FaultProcess() { release(); }

void FaultProcess::release() {
  if (pgid_ > 0) ::kill(-pgid_, SIGKILL);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  closeStdin();
  if (output_fd_ >= 0) ::close(output_fd_);
  output_fd_ = -1;
}

bool FaultProcess::readMore(absl::Time deadline) {
  if (output_fd_ < 0) return false;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    const int wait_ms =
        left <= absl::ZeroDuration() ? 0 : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    pollfd entry{output_fd_, POLLIN, 0};
    const int ready = ::poll(&entry, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return true;
    char chunk[4096];
    const ssize_t got = ::read(output_fd_, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ::close(output_fd_);
      output_fd_ = -1;
      return false;
    }
    all_.append(chunk, static_cast<size_t>(got));
    return true;
  }
}

absl::StatusOr<std::string> FaultProcess::awaitLine(
    const std::function<bool(const std::string&)>& match, absl::Time deadline) {
  while (true) {
    size_t newline;
    while ((newline = all_.find('\n', consumed_)) != std::string::npos) {
      std::string line = all_.substr(consumed_, newline - consumed_);
      consumed_ = newline + 1;
      if (match(line)) return line;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("process ", pid_, " printed no awaited line in time; its output:\n", all_));
    }
    if (!readMore(deadline)) {
      // EOF: whatever is left without a newline is the last line.
      if (consumed_ < all_.size()) {
        std::string line = all_.substr(consumed_);
        consumed_ = all_.size();
        if (match(line)) return line;
      }
      return absl::UnavailableError(absl::StrCat("process ", pid_,
                                                 " closed its output without the awaited line; "
                                                 "its output:\n",
                                                 all_));
    }
  }
}

absl::StatusOr<std::string> FaultProcess::awaitPrefix(const std::string& prefix,
                                                      absl::Time deadline) {
  return awaitLine([&](const std::string& line) { return absl::StartsWith(line, prefix); },
                   deadline);
}

std::string FaultProcess::transcript() {
  while (output_fd_ >= 0) {
    const size_t before = all_.size();
    if (!readMore(absl::Now()) || all_.size() == before) break;
  }
  return all_;
}

void FaultProcess::closeStdin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  stdin_fd_ = -1;
}

void FaultProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

void FaultProcess::signalGroup(int sig) {
  if (pgid_ > 0) ::kill(-pgid_, sig);
}

absl::StatusOr<int> FaultProcess::wait(absl::Time deadline) {
  if (pid_ <= 0) return absl::FailedPreconditionError("process already reaped");
  absl::StatusOr<int> code = comm::testing::reapBy(pid_, deadline);
  if (code.ok()) {
    pid_ = -1;
  } else if (absl::IsDeadlineExceeded(code.status())) {
    const pid_t pid = pid_;
    release();
    return absl::DeadlineExceededError(
        absl::StrCat("process ", pid, " was still running at its deadline; killed it"));
  }
  return code;
}

bool FaultProcess::groupGone() const {
  if (pgid_ <= 0) return true;
  return ::kill(-pgid_, 0) != 0 && errno == ESRCH;
}

double seconds(absl::Duration duration) {
  return static_cast<double>(absl::ToInt64Milliseconds(duration)) / 1000.0;
}

void reportTiming(const std::string& scenario, absl::Duration timeout, absl::Duration time_to_error,
                  const std::string& excerpt) {
  std::string cut = excerpt.substr(0, 220);
  for (char& c : cut) {
    if (c == '|') c = '/';
  }
  std::printf("TIMING | %s | %s | %.2f s | %s |\n", scenario.c_str(),
              timeout == absl::ZeroDuration() ? "-" : absl::FormatDuration(timeout).c_str(),
              seconds(time_to_error), cut.c_str());
  std::fflush(stdout);
}

}  // namespace loom::fault
