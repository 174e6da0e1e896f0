// One rank of mpi_failure_test.sh: the ranks all-reduce once, then one rank
// fails mid-collective and the others report what they see.
//   mpi_failure_rank kill TIMEOUT_S   the last rank dies (SIGKILL) while the
//                                     others all-reduce with that timeout
//   mpi_failure_rank abort TIMEOUT_S  rank 0 calls abort() while the others
//                                     all-reduce with that timeout
// A surviving rank prints "[failure-test] rank R: <status>" and exits 1 on an
// error, 0 if its all-reduce completed (which the test treats as wrong).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/mpi/mpi_backend.h"

namespace loom::comm::mpi {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "[failure-test] %s\n", message.c_str());
  return 2;
}

int runRank(const std::string& mode, absl::Duration timeout) {
  const int rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
  const int size = std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
  BackendContext context;
  context.rank = rank;
  context.size = size;
  context.group_name = "default";
  context.timeout = timeout;
  absl::StatusOr<std::unique_ptr<Backend>> backend = createMpiBackend(context);
  if (!backend.ok()) return fail(backend.status().ToString());
  uint64_t seq = 0;
  auto info = [&] {
    return CollectiveInfo{.group = "default",
                          .rank = rank,
                          .group_size = size,
                          .seq = ++seq,
                          .op = "all_reduce",
                          .peer = -1};
  };
  std::vector<float> values(1024, 1.0f);
  const Tensor tensor = Tensor::of(values);
  Backend::WorkOr first = (*backend)->allReduce(tensor, {}, info());
  if (!first.ok() || !(*first)->wait().ok()) return fail("the first all_reduce failed");

  if (mode == "kill" && rank == size - 1) {
    // Let the others post their all-reduce first, then die mid-collective.
    absl::SleepFor(absl::Milliseconds(300));
    std::raise(SIGKILL);
  }
  if (mode == "abort" && rank == 0) {
    absl::SleepFor(absl::Milliseconds(300));
    (*backend)->abort();
    return fail("abort() returned");
  }
  Backend::WorkOr second = (*backend)->allReduce(tensor, {}, info());
  const absl::Status status = second.ok() ? (*second)->wait() : second.status();
  std::printf("[failure-test] rank %d: %s\n", rank,
              status.ok() ? "the all_reduce completed" : status.ToString().c_str());
  std::fflush(stdout);
  return status.ok() ? 0 : 1;
}

}  // namespace
}  // namespace loom::comm::mpi

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s kill|abort TIMEOUT_SECONDS\n", argv[0]);
    return 2;
  }
  return loom::comm::mpi::runRank(argv[1], absl::Seconds(std::atoi(argv[2])));
}
