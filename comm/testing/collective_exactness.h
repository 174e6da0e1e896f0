// A backend-level check that large collectives are exact on every call:
// one rank issues `calls` calls of a collective back to back, with blocks
// larger than a socket's send buffer, and checks every output element
// against integer-valued expectations. The gloo tests run it on N threads,
// the mpi tests on N processes (docs/comm.md, "Exactness under load").
#ifndef LOOM_COMM_TESTING_COLLECTIVE_EXACTNESS_H_
#define LOOM_COMM_TESTING_COLLECTIVE_EXACTNESS_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "comm/backend.h"

namespace loom::comm::testing {

// One collective of the check, on `n` ranks with blocks of `chunk` f32
// elements: the input it takes (filled with exactValue) and the output it
// gives, in elements, and the value output element `i` must have on rank
// `r`. An in-place call has no input: its output starts as the rank's
// values.
struct ExactCase {
  const char* op;
  int64_t (*input_elements)(int n, int64_t chunk);
  int64_t (*output_elements)(int n, int64_t chunk);
  Backend::WorkOr (*issue)(Backend& backend, Tensor input, Tensor output,
                           const CollectiveInfo& info);
  float (*want)(int r, int64_t i, int call, int n, int64_t chunk);
};

// reduce_scatter, all_reduce, all_gather, all_to_all and broadcast: the
// collectives the runtime issues.
const std::vector<ExactCase>& exactCases();

// Issues `calls` calls of `c` on `backend` (this rank's), sequence numbers
// `first_seq`, `first_seq` + 1, ..., then waits for each and checks every
// element, reporting gtest failures that name the op, ranks, block size,
// call and the first wrong element. Every rank of the group must call it
// with the same arguments.
void expectExactCalls(const ExactCase& c, Backend& backend, int64_t chunk, int calls,
                      uint64_t first_seq);

// Threads that spin until destroyed, so that the transport's threads must
// wait for a core, as they do beside a training step's compute.
class BusyCores {
 public:
  explicit BusyCores(int threads);
  ~BusyCores();
  BusyCores(const BusyCores&) = delete;
  BusyCores& operator=(const BusyCores&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::vector<std::thread> threads_;
};

}  // namespace loom::comm::testing

#endif  // LOOM_COMM_TESTING_COLLECTIVE_EXACTNESS_H_
