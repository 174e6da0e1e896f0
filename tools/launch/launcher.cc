// Implements runLocalJob: fork/exec of the ranks, one poll() loop over their
// output pipes and a self-pipe fed by signal handlers, and the stop sequence
// (stop signal to every rank's process group, grace period, SIGKILL) that
// bounds how long a failing job takes to end.
#include "tools/launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "comm/deadline.h"
#include "tools/launch/line_prefixer.h"

extern char** environ;

namespace loom::launch {
namespace {

using comm::Deadline;

// How long ranks get to die after SIGKILL before the launcher gives up on
// them; only a process stuck in uninterruptible sleep takes longer.
constexpr absl::Duration kKillWait = absl::Seconds(5);
// poll() needs a finite wait; waking once a second with nothing to do is
// harmless.
constexpr int kPollCapMs = 1000;
constexpr size_t kReadChunk = 64 * 1024;

// The signals the launcher passes on to the ranks.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// The variables every rank gets; any inherited value is replaced.
constexpr const char* kRankVariables[] = {
    "RANK",        "LOCAL_RANK",       "WORLD_SIZE",  "LOCAL_WORLD_SIZE",
    "GROUP_RANK",  "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    kStoreTokenEnv};

std::string signalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string errnoText(int error) { return std::strerror(error); }

// Write end of the self-pipe. The handlers write the signal number into it,
// so one poll() wakes for rank output, ranks exiting and stop signals alike.
int g_signal_pipe_write = -1;
std::atomic<bool> g_job_running{false};

void onSignal(int signal) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  // The pipe is full only if thousands of wake-ups wait unread; one more
  // would change nothing.
  [[maybe_unused]] const ssize_t written = ::write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

// Installs the launcher's signal handling for one job and restores the
// caller's when destroyed.
class SignalScope {
 public:
  static absl::StatusOr<std::unique_ptr<SignalScope>> install() {
    auto scope = std::unique_ptr<SignalScope>(new SignalScope());
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      return absl::InternalError(
          absl::StrCat("cannot create the launcher's signal pipe: ", errnoText(errno)));
    }
    scope->read_fd_ = fds[0];
    scope->write_fd_ = fds[1];
    g_signal_pipe_write = fds[1];
    struct sigaction action = {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int signal : kStopSignals) {
      struct sigaction previous = {};
      ::sigaction(signal, nullptr, &previous);
      // A signal ignored from the start stays ignored, as shells expect of
      // background jobs and nohup: the launcher then neither catches nor
      // forwards it.
      if (previous.sa_handler == SIG_IGN) continue;
      scope->replace(signal, action);
    }
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    scope->replace(SIGCHLD, action);
    // A closed stdout must not kill the launcher and orphan the ranks; a
    // failed write drops that output instead.
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    scope->replace(SIGPIPE, ignore);
    sigset_t unblock;
    sigemptyset(&unblock);
    for (const auto& [signal, previous] : scope->saved_) {
      sigaddset(&unblock, signal);
    }
    ::pthread_sigmask(SIG_UNBLOCK, &unblock, &scope->caller_mask_);
    return scope;
  }

  ~SignalScope() {
    ::pthread_sigmask(SIG_SETMASK, &caller_mask_, nullptr);
    for (const auto& [signal, previous] : saved_) {
      ::sigaction(signal, &previous, nullptr);
    }
    g_signal_pipe_write = -1;
    ::close(read_fd_);
    ::close(write_fd_);
  }

  int readFd() const { return read_fd_; }

  // The signals whose disposition the launcher changed; a child resets
  // them to the default before it execs.
  std::vector<int> changed() const {
    std::vector<int> signals;
    for (const auto& [signal, previous] : saved_) signals.push_back(signal);
    return signals;
  }

  // The stop signals and SIGCHLD bytes that arrived since the last call.
  std::vector<int> takeSignals() {
    std::vector<int> signals;
    unsigned char bytes[64];
    ssize_t n;
    while ((n = ::read(read_fd_, bytes, sizeof bytes)) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (bytes[i] != SIGCHLD) signals.push_back(bytes[i]);
      }
    }
    return signals;
  }

 private:
  SignalScope() = default;

  void replace(int signal, const struct sigaction& action) {
    struct sigaction previous = {};
    ::sigaction(signal, &action, &previous);
    saved_.emplace_back(signal, previous);
  }

  int read_fd_ = -1;
  int write_fd_ = -1;
  std::vector<std::pair<int, struct sigaction>> saved_;
  sigset_t caller_mask_;
};

absl::Status validate(const LaunchOptions& options) {
  if (options.nproc < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nproc is %d; it must be at least 1 (the number of ranks to start "
                        "on this machine)",
                        options.nproc));
  }
  if (options.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("nnodes is %d; it must be at least 1 (the number of machines in the "
                        "job)",
                        options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("node_rank is %d but nnodes is %d; number the machines 0 to %d",
                        options.node_rank, options.nnodes, options.nnodes - 1));
  }
  if (options.master_addr.empty()) {
    return absl::InvalidArgumentError(
        "master_addr is empty; give the host name or address of the machine "
        "that runs rank 0");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("master_port is %d; it must be a port number in [1, 65535], or 0 to "
                        "pick a free one",
                        options.master_port));
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a job over %d machines needs an explicit master_port: every machine "
                        "must give its ranks the same port, so none can pick one at random",
                        options.nnodes));
  }
  if (options.nnodes > 1 && options.token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a job over %d machines needs a store token that every machine "
                        "shares; export the same %s (any random string) on every machine",
                        options.nnodes, kStoreTokenEnv));
  }
  if (options.grace_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat("grace_period is %s; it must not be negative",
                                                      absl::FormatDuration(options.grace_period)));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("timeout is %s; it must be positive (leave it unset for no limit)",
                        absl::FormatDuration(options.timeout)));
  }
  return absl::OkStatus();
}

absl::Status checkExecutable(const std::string& path) {
  struct stat info = {};
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(
          absl::StrFormat("rank binary '%s' does not exist; check the path", path));
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot use rank binary '%s': %s", path, errnoText(error)));
  }
  if (S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("rank binary '%s' is a directory; name the program inside it", path));
  }
  if (::access(path.c_str(), X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrFormat("rank binary '%s' is not executable; chmod +x it or name the right "
                        "file",
                        path));
  }
  return absl::OkStatus();
}

// The path to exec: `binary` itself if it has a slash, else its first
// executable match on PATH, as a shell would find it.
absl::StatusOr<std::string> resolveBinary(const std::string& binary) {
  if (binary.empty()) {
    return absl::InvalidArgumentError(
        "no rank binary given; name the program every rank runs after '--', "
        "e.g. launch --nproc=2 -- ./train");
  }
  if (binary.find('/') != std::string::npos) {
    if (absl::Status status = checkExecutable(binary); !status.ok()) {
      return status;
    }
    return binary;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", binary);
    struct stat info = {};
    if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(
      absl::StrFormat("rank binary '%s' is not on PATH (%s); give its path instead", binary, path));
}

// A port that is free now: bound on every interface and released at once,
// as torchrun does. Rank 0's store binds it moments later.
absl::StatusOr<int> pickFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(
        "cannot pick a free master port: socket: ", errnoText(errno), "; pass --master_port"));
  }
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("cannot pick a free master port: ", errnoText(error), "; pass --master_port"));
  }
  return ntohs(address.sin_port);
}

std::string randomToken() {
  absl::BitGen random;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(random),
                         absl::Uniform<uint64_t>(random));
}

void writeAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(n);
    } else if (n < 0 && errno == EAGAIN) {
      // Someone made our output non-blocking; wait as a blocking write would.
      pollfd writable = {fd, POLLOUT, 0};
      ::poll(&writable, 1, -1);
    } else if (n < 0 && errno != EINTR) {
      // A closed or broken output drops the text; the job goes on.
      return;
    }
  }
}

// "rank 2" / "ranks 0,1,3".
std::string rankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

std::string describeEnding(const RankOutcome& outcome) {
  if (outcome.term_signal.has_value()) {
    return absl::StrFormat("was killed by signal %d (%s)", *outcome.term_signal,
                           signalName(*outcome.term_signal));
  }
  return absl::StrFormat("exited with status %d", outcome.exit_code.value_or(0));
}

// One output stream (stdout or stderr) of one rank.
struct Stream {
  int fd = -1;  // read end of the rank's pipe; -1 once closed
  int sink = -1;
  LinePrefixer lines{""};
};

struct Rank {
  RankOutcome outcome;
  // Started and not yet seen exiting. An exited rank stays an unreaped
  // zombie until the job ends, so its pid, which is also its process
  // group's id, cannot be reused and signalling the group stays safe.
  bool running = false;
  Stream streams[2];
};

enum class Phase { kRunning, kStopping, kKilling };

class Job {
 public:
  Job(const LaunchOptions& options, std::string path, int master_port, std::string token,
      SignalScope& signals)
      : options_(options),
        path_(std::move(path)),
        master_port_(master_port),
        token_(std::move(token)),
        signals_(signals),
        read_buffer_(kReadChunk) {
    argv_storage_.push_back(path_);
    argv_storage_.insert(argv_storage_.end(), options_.args.begin(), options_.args.end());
    ranks_.resize(options_.nproc);
  }

  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Closes the pipes and, when start() failed part-way, kills the ranks it
  // had started.
  ~Job() {
    if (!finished_) {
      for (Rank& rank : ranks_) {
        if (rank.running) signalGroup(rank, SIGKILL);
      }
      const Deadline deadline = Deadline::after(kKillWait);
      for (Rank& rank : ranks_) {
        while (rank.running && !deadline.expired()) {
          if (::waitpid(rank.outcome.pid, nullptr, WNOHANG) == rank.outcome.pid) {
            rank.running = false;
          } else {
            ::usleep(10'000);
          }
        }
      }
    }
    for (Rank& rank : ranks_) {
      for (Stream& stream : rank.streams) {
        if (stream.fd >= 0) ::close(stream.fd);
      }
    }
    if (dev_null_ >= 0) ::close(dev_null_);
  }

  absl::Status start() {
    dev_null_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (dev_null_ < 0) {
      return absl::InternalError(absl::StrCat("cannot open /dev/null: ", errnoText(errno)));
    }
    for (int local_rank = 0; local_rank < options_.nproc; ++local_rank) {
      if (absl::Status status = spawn(local_rank); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  LaunchResult run() {
    deadline_ = Deadline::after(options_.timeout);
    while (true) {
      pollOnce();
      const std::vector<int> signals = signals_.takeSignals();
      collectExits();
      for (int signal : signals) onStopSignal(signal);
      if (runningCount() == 0) break;
      if (!deadline_.expired()) continue;
      if (phase_ == Phase::kRunning) {
        end_ = JobEnd::kTimedOut;
        startStop(SIGTERM);
      } else if (phase_ == Phase::kStopping) {
        killRunning();
      } else {
        break;
      }
    }
    finish();
    return result();
  }

 private:
  std::vector<std::string> environmentFor(int rank, int local_rank) const {
    const int world_size = options_.nnodes * options_.nproc;
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const absl::string_view text(*entry);
      const absl::string_view name = text.substr(0, text.find('='));
      bool replaced = false;
      for (const char* variable : kRankVariables) {
        replaced = replaced || name == variable;
      }
      if (!replaced) env.emplace_back(text);
    }
    env.push_back(absl::StrCat("RANK=", rank));
    env.push_back(absl::StrCat("LOCAL_RANK=", local_rank));
    env.push_back(absl::StrCat("WORLD_SIZE=", world_size));
    env.push_back(absl::StrCat("LOCAL_WORLD_SIZE=", options_.nproc));
    env.push_back(absl::StrCat("GROUP_RANK=", options_.node_rank));
    env.push_back(absl::StrCat("GROUP_WORLD_SIZE=", options_.nnodes));
    env.push_back(absl::StrCat("MASTER_ADDR=", options_.master_addr));
    env.push_back(absl::StrCat("MASTER_PORT=", master_port_));
    env.push_back(absl::StrCat(kStoreTokenEnv, "=", token_));
    return env;
  }

  absl::Status spawn(int local_rank) {
    Rank& rank = ranks_[local_rank];
    rank.outcome.local_rank = local_rank;
    rank.outcome.rank = options_.node_rank * options_.nproc + local_rank;
    // Everything the child needs is built before fork(): between fork and
    // exec it may only make async-signal-safe calls.
    std::vector<std::string> env_storage = environmentFor(rank.outcome.rank, local_rank);
    std::vector<char*> envp;
    for (std::string& entry : env_storage) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (std::string& arg : argv_storage_) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::vector<int> reset_signals = signals_.changed();

    // Read and write ends of the rank's stdout and stderr pipes (prefixed
    // output only) and of the exec-error pipe.
    int output[2][2] = {{-1, -1}, {-1, -1}};
    int exec_pipe[2] = {-1, -1};
    std::vector<int*> pipes = {exec_pipe};
    if (options_.prefix_output) {
      pipes.push_back(output[0]);
      pipes.push_back(output[1]);
    }
    for (size_t i = 0; i < pipes.size(); ++i) {
      if (::pipe2(pipes[i], O_CLOEXEC) != 0) {
        const int error = errno;
        for (size_t j = 0; j < i; ++j) {
          ::close(pipes[j][0]);
          ::close(pipes[j][1]);
        }
        return absl::ResourceExhaustedError(
            absl::StrFormat("cannot start rank %d: pipe: %s", rank.outcome.rank, errnoText(error)));
      }
    }
    const int child_stdout = options_.prefix_output ? output[0][1] : options_.stdout_fd;
    const int child_stderr = options_.prefix_output ? output[1][1] : options_.stderr_fd;

    sigset_t all;
    sigset_t before;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &before);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // With every signal blocked, reset the launcher's handlers so no
      // signal runs them in the child before exec.
      struct sigaction default_action = {};
      default_action.sa_handler = SIG_DFL;
      for (int signal : reset_signals) {
        ::sigaction(signal, &default_action, nullptr);
      }
      // Its own process group lets the launcher signal the rank together
      // with everything it starts.
      ::setpgid(0, 0);
      // If the launcher dies without cleaning up (SIGKILL, OOM), the rank
      // dies with it instead of running on unsupervised.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(dev_null_, STDIN_FILENO);
      ::dup2(child_stdout, STDOUT_FILENO);
      ::dup2(child_stderr, STDERR_FILENO);
      // Ranks start with no signal blocked so that SIGTERM always reaches
      // them, whatever the caller of the launcher had blocked.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(path_.c_str(), argv.data(), envp.data());
      const int error = errno;
      [[maybe_unused]] const ssize_t written = ::write(exec_pipe[1], &error, sizeof error);
      ::_exit(127);
    }
    const int fork_error = errno;
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    for (int* ends : pipes) ::close(ends[1]);
    if (pid < 0) {
      for (int* ends : pipes) ::close(ends[0]);
      return absl::ResourceExhaustedError(absl::StrFormat(
          "cannot start rank %d: fork: %s", rank.outcome.rank, errnoText(fork_error)));
    }
    rank.outcome.pid = pid;
    rank.running = true;
    if (options_.prefix_output) {
      const std::string prefix = absl::StrCat("[rank ", rank.outcome.rank, "] ");
      const int sinks[2] = {options_.stdout_fd, options_.stderr_fd};
      for (int i = 0; i < 2; ++i) {
        Stream& stream = rank.streams[i];
        stream.fd = output[i][0];
        stream.sink = sinks[i];
        stream.lines = LinePrefixer(prefix);
        ::fcntl(stream.fd, F_SETFL, O_NONBLOCK);
      }
    }
    // The exec-error pipe closes on a successful exec and carries errno
    // otherwise, so a rank that could not start is reported, not mistaken
    // for a rank that failed.
    int exec_error = 0;
    ssize_t n;
    do {
      n = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
    } while (n < 0 && errno == EINTR);
    ::close(exec_pipe[0]);
    if (n == sizeof exec_error) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      rank.running = false;
      return absl::FailedPreconditionError(
          absl::StrFormat("cannot start rank %d: exec of '%s' failed: %s", rank.outcome.rank, path_,
                          errnoText(exec_error)));
    }
    return absl::OkStatus();
  }

  // Signals the rank's process group: the rank and whatever it started.
  static void signalGroup(const Rank& rank, int signal) {
    if (rank.outcome.pid > 0) ::kill(-rank.outcome.pid, signal);
  }

  int runningCount() const {
    int count = 0;
    for (const Rank& rank : ranks_) count += rank.running ? 1 : 0;
    return count;
  }

  // Waits for output, a signal or a child exiting, until the current
  // deadline at the latest, and forwards the output that arrived.
  void pollOnce() {
    std::vector<pollfd> fds = {{signals_.readFd(), POLLIN, 0}};
    std::vector<Stream*> streams = {nullptr};
    for (Rank& rank : ranks_) {
      for (Stream& stream : rank.streams) {
        if (stream.fd < 0) continue;
        fds.push_back({stream.fd, POLLIN, 0});
        streams.push_back(&stream);
      }
    }
    if (::poll(fds.data(), fds.size(), deadline_.pollMillis(kPollCapMs)) <= 0) {
      return;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) readOnce(*streams[i]);
    }
  }

  // Reads what one stream has ready; false when there was nothing.
  bool readOnce(Stream& stream) {
    const ssize_t n = ::read(stream.fd, read_buffer_.data(), read_buffer_.size());
    if (n > 0) {
      writeAll(stream.sink, stream.lines.feed(absl::string_view(read_buffer_.data(), n)));
      return true;
    }
    if (n < 0 && errno == EINTR) return true;
    // End of stream, or EAGAIN when draining a pipe that something outside
    // the rank's process group still holds open: either way the rank's own
    // output is complete.
    if (n == 0 || errno != EAGAIN) closeStream(stream);
    return false;
  }

  void closeStream(Stream& stream) {
    writeAll(stream.sink, stream.lines.finish());
    ::close(stream.fd);
    stream.fd = -1;
  }

  // Notes ranks that exited, leaving them as zombies (WNOWAIT). In the
  // running phase the first failure found ends the job.
  void collectExits() {
    std::vector<int> failed;
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      siginfo_t info = {};
      if (::waitid(P_PID, rank.outcome.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          info.si_pid != rank.outcome.pid) {
        continue;
      }
      rank.running = false;
      if (info.si_code == CLD_EXITED) {
        rank.outcome.exit_code = info.si_status;
      } else {
        rank.outcome.term_signal = info.si_status;
      }
      if (rank.outcome.term_signal.has_value() || rank.outcome.exit_code != 0) {
        failed.push_back(rank.outcome.local_rank);
      }
    }
    if (phase_ == Phase::kRunning && !failed.empty()) {
      end_ = JobEnd::kRankFailed;
      failed_local_rank_ = failed.front();
      startStop(SIGTERM);
    }
  }

  void onStopSignal(int signal) {
    if (phase_ == Phase::kRunning) {
      end_ = JobEnd::kInterrupted;
      received_signal_ = signal;
      startStop(signal);
    } else if (phase_ == Phase::kStopping) {
      // A second Ctrl-C means "now": skip the rest of the grace period.
      escalation_signal_ = signal;
      killRunning();
    }
  }

  // Sends `signal` to every rank's process group (an exited rank's group
  // may still hold its children) and starts the grace period.
  void startStop(int signal) {
    phase_ = Phase::kStopping;
    stop_signal_ = signal;
    deadline_ = Deadline::after(options_.grace_period);
    for (Rank& rank : ranks_) {
      if (rank.running) rank.outcome.stopped = true;
      signalGroup(rank, signal);
    }
  }

  void killRunning() {
    phase_ = Phase::kKilling;
    deadline_ = Deadline::after(kKillWait);
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      rank.outcome.killed = true;
      signalGroup(rank, SIGKILL);
    }
  }

  // Reaps the exited ranks, held as zombies until now; a rank that
  // survived SIGKILL is left to whoever inherits it.
  void reapExited() {
    for (Rank& rank : ranks_) {
      if (rank.running) continue;
      while (::waitpid(rank.outcome.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  // Kills whatever is left in the ranks' process groups, so nothing the job
  // started outlives it, then takes the rest of the output and reaps.
  void finish() {
    for (const Rank& rank : ranks_) signalGroup(rank, SIGKILL);
    for (Rank& rank : ranks_) {
      for (Stream& stream : rank.streams) {
        while (stream.fd >= 0 && readOnce(stream)) {
        }
        if (stream.fd >= 0) closeStream(stream);
      }
    }
    reapExited();
    finished_ = true;
  }

  LaunchResult result() const {
    LaunchResult result;
    result.end = end_;
    result.master_port = master_port_;
    std::vector<int> stopped;
    std::vector<int> killed;
    for (const Rank& rank : ranks_) {
      result.ranks.push_back(rank.outcome);
      if (rank.outcome.stopped) stopped.push_back(rank.outcome.rank);
      if (rank.outcome.killed) killed.push_back(rank.outcome.rank);
    }
    switch (end_) {
      case JobEnd::kSucceeded:
        return result;
      case JobEnd::kRankFailed: {
        const RankOutcome& culprit = ranks_[failed_local_rank_].outcome;
        result.failed_rank = culprit.rank;
        result.exit_code =
            culprit.term_signal.has_value() ? 128 + *culprit.term_signal : *culprit.exit_code;
        result.message = absl::StrFormat("rank %d (pid %d) %s", culprit.rank, culprit.pid,
                                         describeEnding(culprit));
        break;
      }
      case JobEnd::kTimedOut:
        result.exit_code = kTimeoutExitCode;
        result.message =
            absl::StrFormat("job timeout of %s expired", absl::FormatDuration(options_.timeout));
        break;
      case JobEnd::kInterrupted:
        result.exit_code = 128 + received_signal_;
        result.message = absl::StrCat("launcher received ", signalName(received_signal_));
        break;
    }
    if (stopped.empty()) {
      absl::StrAppend(&result.message, end_ == JobEnd::kRankFailed
                                           ? "; no other rank was still running"
                                           : "; no rank was still running");
    } else {
      absl::StrAppend(&result.message, "; stopped ", rankList(stopped), " with ",
                      signalName(stop_signal_));
    }
    if (!killed.empty()) {
      const std::string why =
          escalation_signal_ != 0
              ? absl::StrCat("after a second ", signalName(escalation_signal_))
              : absl::StrCat("after the ", absl::FormatDuration(options_.grace_period),
                             " grace period");
      absl::StrAppend(&result.message, "; ", rankList(killed),
                      killed.size() == 1 ? " was" : " were", " still running and got SIGKILL ",
                      why);
    }
    for (const Rank& rank : ranks_) {
      if (!rank.running) continue;
      absl::StrAppend(
          &result.message,
          absl::StrFormat("; rank %d (pid %d) survived SIGKILL for %s (stuck "
                          "in the kernel?) and was left behind",
                          rank.outcome.rank, rank.outcome.pid, absl::FormatDuration(kKillWait)));
    }
    return result;
  }

  const LaunchOptions& options_;
  const std::string path_;
  const int master_port_;
  const std::string token_;
  SignalScope& signals_;
  std::vector<char> read_buffer_;
  std::vector<std::string> argv_storage_;
  std::vector<Rank> ranks_;
  int dev_null_ = -1;
  bool finished_ = false;

  Phase phase_ = Phase::kRunning;
  Deadline deadline_ = Deadline::after(absl::InfiniteDuration());
  JobEnd end_ = JobEnd::kSucceeded;
  int failed_local_rank_ = 0;
  int stop_signal_ = 0;
  int received_signal_ = 0;
  int escalation_signal_ = 0;
};

// Clears the one-job-per-process flag however runLocalJob returns.
class JobRunningGuard {
 public:
  JobRunningGuard() : acquired_(!g_job_running.exchange(true)) {}
  ~JobRunningGuard() {
    if (acquired_) g_job_running = false;
  }
  bool acquired() const { return acquired_; }

 private:
  bool acquired_;
};

}  // namespace

absl::StatusOr<LaunchResult> runLocalJob(const LaunchOptions& options) {
  if (absl::Status status = validate(options); !status.ok()) return status;
  absl::StatusOr<std::string> path = resolveBinary(options.binary);
  if (!path.ok()) return path.status();
  int master_port = options.master_port;
  if (master_port == 0) {
    absl::StatusOr<int> picked = pickFreePort();
    if (!picked.ok()) return picked.status();
    master_port = *picked;
  }
  const std::string token = options.token.empty() ? randomToken() : options.token;

  JobRunningGuard guard;
  if (!guard.acquired()) {
    return absl::FailedPreconditionError(
        "another runLocalJob is running in this process; the launcher's "
        "signal handling is process-wide, so run jobs one after another");
  }
  absl::StatusOr<std::unique_ptr<SignalScope>> signals = SignalScope::install();
  if (!signals.ok()) return signals.status();
  Job job(options, *std::move(path), master_port, token, **signals);
  if (absl::Status status = job.start(); !status.ok()) return status;
  return job.run();
}

}  // namespace loom::launch
