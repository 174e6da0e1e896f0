// The collective exactness check: the case table and the per-rank driver.
#include "comm/testing/collective_exactness.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace loom::comm::testing {
namespace {

// What rank `rank` holds at element `i` of call `call`: small integers, so
// every sum is exact and a wrong addend shows.
float exactValue(int rank, int64_t i, int call) {
  return static_cast<float>((i * 7 + rank * 13 + call * 5) % 17) - 8.0f;
}

float sumOverRanks(int n, int64_t i, int call) {
  float sum = 0;
  for (int p = 0; p < n; ++p) sum += exactValue(p, i, call);
  return sum;
}

int64_t none(int, int64_t) { return 0; }
int64_t oneChunk(int, int64_t chunk) { return chunk; }
int64_t allChunks(int n, int64_t chunk) { return chunk * n; }

}  // namespace

const std::vector<ExactCase>& exactCases() {
  static const std::vector<ExactCase> kCases = {
      {"reduce_scatter", allChunks, oneChunk,
       [](Backend& b, Tensor in, Tensor out, const CollectiveInfo& info) {
         return b.reduceScatterTensor(out, in, {}, info);
       },
       [](int r, int64_t i, int call, int n, int64_t chunk) {
         return sumOverRanks(n, r * chunk + i, call);
       }},
      {"all_reduce", none, allChunks,
       [](Backend& b, Tensor, Tensor out, const CollectiveInfo& info) {
         return b.allReduce(out, {}, info);
       },
       [](int, int64_t i, int call, int n, int64_t) { return sumOverRanks(n, i, call); }},
      {"all_gather", oneChunk, allChunks,
       [](Backend& b, Tensor in, Tensor out, const CollectiveInfo& info) {
         return b.allGatherIntoTensor(out, in, {}, info);
       },
       [](int, int64_t i, int call, int, int64_t chunk) {
         return exactValue(static_cast<int>(i / chunk), i % chunk, call);
       }},
      {"all_to_all", allChunks, allChunks,
       [](Backend& b, Tensor in, Tensor out, const CollectiveInfo& info) {
         const std::vector<int64_t> splits(b.size(), in.numel() / b.size());
         return b.allToAllSingle(out, in, splits, splits, {}, info);
       },
       [](int r, int64_t i, int call, int, int64_t chunk) {
         return exactValue(static_cast<int>(i / chunk), r * chunk + i % chunk, call);
       }},
      {"broadcast", none, allChunks,
       [](Backend& b, Tensor, Tensor out, const CollectiveInfo& info) {
         return b.broadcast(out, {.root = 0}, info);
       },
       [](int, int64_t i, int call, int, int64_t) { return exactValue(0, i, call); }},
  };
  return kCases;
}

void expectExactCalls(const ExactCase& c, Backend& backend, int64_t chunk, int calls,
                      uint64_t first_seq) {
  const int n = backend.size();
  const int r = backend.rank();
  const int64_t in_count = c.input_elements(n, chunk);
  const int64_t out_count = c.output_elements(n, chunk);
  std::vector<std::vector<float>> inputs(calls, std::vector<float>(in_count));
  std::vector<std::vector<float>> outputs(calls, std::vector<float>(out_count));
  std::vector<std::shared_ptr<Work>> works;
  for (int call = 0; call < calls; ++call) {
    std::vector<float>& filled = in_count > 0 ? inputs[call] : outputs[call];
    for (size_t i = 0; i < filled.size(); ++i) filled[i] = exactValue(r, i, call);
    const CollectiveInfo info{.group = backend.groupName(),
                              .rank = r,
                              .group_size = n,
                              .seq = first_seq + call,
                              .op = c.op};
    Backend::WorkOr work =
        c.issue(backend, Tensor::of(inputs[call]), Tensor::of(outputs[call]), info);
    ASSERT_TRUE(work.ok()) << work.status();
    works.push_back(*work);
  }
  for (int call = 0; call < calls; ++call) {
    const absl::Status status = works[call]->wait(absl::Seconds(120));
    ASSERT_TRUE(status.ok()) << status;
    int64_t wrong = 0;
    for (int64_t i = 0; i < out_count; ++i) {
      const float want = c.want(r, i, call, n, chunk);
      if (outputs[call][i] != want && wrong++ == 0) {
        ADD_FAILURE() << c.op << " on " << n << " ranks, blocks of " << chunk << " floats, call "
                      << call << ", rank " << r << ": element " << i << " is " << outputs[call][i]
                      << ", want " << want;
      }
    }
    EXPECT_EQ(wrong, 0) << c.op << ": wrong elements on rank " << r << ", call " << call;
  }
}

BusyCores::BusyCores(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      volatile uint64_t spin = 0;
      while (!done_.load(std::memory_order_relaxed)) spin = spin + 1;
    });
  }
}

BusyCores::~BusyCores() {
  done_ = true;
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace loom::comm::testing
