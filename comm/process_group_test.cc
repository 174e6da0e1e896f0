// Tests of ProcessGroup over the gloo backend with each rank a thread of
// this process: every collective on 2, 3 and 4 ranks, every reduce op on
// every dtype, send/recv and batches, several outstanding Works, subgroups,
// and the front end's argument checks.
#include "comm/process_group.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "comm/all_backends.h"
#include "comm/errors.h"
#include "comm/hash_store.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm {
namespace {

using ::loom::comm::testing::Buffer;
using ::loom::comm::testing::describe;
using ::loom::comm::testing::runRanks;
using ::loom::comm::testing::testValue;
using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Waits for a call and fails the test with its status if it failed.
void run(const absl::StatusOr<std::shared_ptr<Work>>& work, const std::string& what) {
  ASSERT_TRUE(work.ok()) << what << ": " << work.status();
  const absl::Status status = (*work)->wait();
  EXPECT_TRUE(status.ok()) << what << ": " << status;
  EXPECT_TRUE((*work)->isCompleted());
  EXPECT_TRUE((*work)->isSuccess());
}

void expectSame(const Buffer& got, const Buffer& want, const std::string& what) {
  EXPECT_EQ(got.bytes(), want.bytes())
      << what << ": got " << describe(got) << ", want " << describe(want);
}

bool isBitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

// Whether the front end accepts `op` on `dtype`.
bool defined(ReduceOp op, DType dtype) {
  if (isBitwise(op)) return !isFloatingPoint(dtype);
  return !(op == ReduceOp::kAvg && dtype == DType::kBool);
}

double combine(ReduceOp op, DType dtype, double a, double b) {
  const auto x = static_cast<int64_t>(a);
  const auto y = static_cast<int64_t>(b);
  const bool boolean = dtype == DType::kBool;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return boolean ? static_cast<double>(x || y) : a + b;
    case ReduceOp::kProduct:
      return boolean ? static_cast<double>(x && y) : a * b;
    case ReduceOp::kMin:
      return std::min(a, b);
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kBand:
      return static_cast<double>(x & y);
    case ReduceOp::kBor:
      return static_cast<double>(x | y);
    case ReduceOp::kBxor:
      return static_cast<double>(x ^ y);
  }
  return 0;
}

// The reduction over ranks of testValue(dtype, r, i, salt), as PyTorch
// computes it: AVG divides the sum in the dtype's arithmetic (float for the
// 16-bit types and f32, truncation for integers).
Buffer expectedReduction(ReduceOp op, DType dtype, int size, int64_t count, int salt) {
  Buffer want(dtype, std::vector<int64_t>{count});
  for (int64_t i = 0; i < count; ++i) {
    double value = testValue(dtype, 0, i, salt);
    for (int r = 1; r < size; ++r) value = combine(op, dtype, value, testValue(dtype, r, i, salt));
    if (op == ReduceOp::kAvg) {
      if (dtype == DType::kFloat64) {
        value /= size;
      } else if (isFloatingPoint(dtype)) {
        value = static_cast<float>(value) / static_cast<float>(size);
      } else {
        value = std::trunc(value / size);
      }
    }
    want.set(i, value);
  }
  return want;
}

Buffer inputOf(DType dtype, int rank, int64_t count, int salt) {
  Buffer buffer(dtype, std::vector<int64_t>{count});
  for (int64_t i = 0; i < count; ++i) buffer.set(i, testValue(dtype, rank, i, salt));
  return buffer;
}

ProcessGroupOptions quickOptions(absl::Duration timeout = absl::Seconds(20)) {
  ProcessGroupOptions options;
  options.timeout = timeout;
  return options;
}

class ProcessGroupTest : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessGroupTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Ranks");
                         });

TEST_P(ProcessGroupTest, AllReduceEveryOpOnEveryDType) {
  // 37 elements: not a multiple of any group size, so Gloo's ring splits
  // them unevenly.
  constexpr int64_t kCount = 37;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        int salt = 0;
        for (ReduceOp op : kAllReduceOps) {
          for (DType dtype : kAllDTypes) {
            ++salt;
            if (!defined(op, dtype)) continue;
            const std::string what =
                absl::StrCat("all_reduce ", std::string(reduceOpName(op)), " on ",
                             std::string(dtypeName(dtype)), ", rank ", group.rank());
            Buffer buffer = inputOf(dtype, group.rank(), kCount, salt);
            run(group.allReduce(buffer.tensor(), {.op = op}), what);
            expectSame(buffer, expectedReduction(op, dtype, group.size(), kCount, salt), what);
          }
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, ReduceScatterEveryOpOnEveryDType) {
  constexpr int64_t kChunk = 5;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        int salt = 0;
        for (ReduceOp op : kAllReduceOps) {
          for (DType dtype : kAllDTypes) {
            ++salt;
            if (!defined(op, dtype)) continue;
            const std::string what =
                absl::StrCat("reduce_scatter_tensor ", std::string(reduceOpName(op)), " on ",
                             std::string(dtypeName(dtype)), ", rank ", group.rank());
            const Buffer input = inputOf(dtype, group.rank(), kChunk * n, salt);
            const Buffer before = input;
            Buffer output(dtype, std::vector<int64_t>{kChunk});
            run(group.reduceScatterTensor(output.tensor(), input.tensor(), {.op = op}), what);
            const Buffer all = expectedReduction(op, dtype, n, kChunk * n, salt);
            Buffer want(dtype, std::vector<int64_t>{kChunk});
            for (int64_t i = 0; i < kChunk; ++i) want.set(i, all.at(group.rank() * kChunk + i));
            expectSame(output, want, what);
            expectSame(input, before, what + " (input must stay intact)");
          }
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, ReduceScatterListTakesEachRanksChunkFromItsOwnTensor) {
  constexpr int64_t kChunk = 3;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kBFloat16}) {
          std::vector<Buffer> inputs;
          std::vector<Tensor> views;
          for (int r = 0; r < n; ++r) {
            inputs.emplace_back(dtype, std::vector<int64_t>{kChunk});
            for (int64_t i = 0; i < kChunk; ++i) {
              inputs.back().set(i, testValue(dtype, group.rank(), r * kChunk + i, 1));
            }
            views.push_back(inputs.back().tensor());
          }
          Buffer output(dtype, std::vector<int64_t>{kChunk});
          run(group.reduceScatter(output.tensor(), views, {.op = ReduceOp::kMax}),
              "reduce_scatter");
          const Buffer all = expectedReduction(ReduceOp::kMax, dtype, n, kChunk * n, 1);
          Buffer want(dtype, std::vector<int64_t>{kChunk});
          for (int64_t i = 0; i < kChunk; ++i) want.set(i, all.at(group.rank() * kChunk + i));
          expectSame(output, want, "reduce_scatter list");
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, ReduceReachesEveryRoot) {
  constexpr int64_t kCount = 11;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        for (int root = 0; root < group.size(); ++root) {
          for (auto [op, dtype] : {std::pair{ReduceOp::kSum, DType::kFloat32},
                                   std::pair{ReduceOp::kMax, DType::kInt32},
                                   std::pair{ReduceOp::kAvg, DType::kFloat64},
                                   std::pair{ReduceOp::kBxor, DType::kUInt8},
                                   std::pair{ReduceOp::kProduct, DType::kFloat16}}) {
            const int salt = root * 10 + static_cast<int>(op);
            Buffer buffer = inputOf(dtype, group.rank(), kCount, salt);
            const std::string what = absl::StrCat("reduce ", std::string(reduceOpName(op)),
                                                  " to root ", root, ", rank ", group.rank());
            run(group.reduce(buffer.tensor(), {.root = root, .op = op}), what);
            if (group.rank() == root) {
              expectSame(buffer, expectedReduction(op, dtype, group.size(), kCount, salt), what);
            }
          }
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, BroadcastFromEveryRoot) {
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        for (int root = 0; root < group.size(); ++root) {
          for (DType dtype : {DType::kFloat64, DType::kInt8, DType::kBool}) {
            Buffer buffer = inputOf(dtype, group.rank(), 9, root);
            run(group.broadcast(buffer.tensor(), {.root = root}), "broadcast");
            expectSame(buffer, inputOf(dtype, root, 9, root),
                       absl::StrCat("broadcast from ", root, " on rank ", group.rank()));
          }
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, AllGatherIntoListTensorAndInPlace) {
  constexpr int64_t kCount = 6;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        const DType dtype = DType::kInt32;
        const Buffer input = inputOf(dtype, group.rank(), kCount, 3);
        Buffer want(dtype, std::vector<int64_t>{kCount * n});
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < kCount; ++i) want.set(r * kCount + i, testValue(dtype, r, i, 3));
        }

        // Separate output tensors (not adjacent in memory).
        std::vector<Buffer> outputs;
        std::vector<Tensor> views;
        for (int r = 0; r < n; ++r) outputs.emplace_back(dtype, std::vector<int64_t>{kCount});
        for (Buffer& output : outputs) views.push_back(output.tensor());
        run(group.allGather(views, input.tensor()), "all_gather list");
        for (int r = 0; r < n; ++r) expectSame(outputs[r], inputOf(dtype, r, kCount, 3), "list");

        // Adjacent chunks of one buffer, which Gloo fills directly.
        Buffer flat(dtype, std::vector<int64_t>{kCount * n});
        std::vector<Tensor> chunks;
        for (int r = 0; r < n; ++r) chunks.push_back(*flat.tensor().narrow(r * kCount, kCount));
        run(group.allGather(chunks, input.tensor()), "all_gather adjacent");
        expectSame(flat, want, "adjacent list");

        Buffer into(dtype, std::vector<int64_t>{kCount * n});
        run(group.allGatherIntoTensor(into.tensor(), input.tensor()), "all_gather_into_tensor");
        expectSame(into, want, "into tensor");

        // In place: the input is this rank's own chunk of the output.
        Buffer in_place(dtype, std::vector<int64_t>{kCount * n});
        const Tensor mine = *in_place.tensor().narrow(group.rank() * kCount, kCount);
        std::memcpy(mine.data(), input.tensor().data(), input.tensor().nbytes());
        run(group.allGatherIntoTensor(in_place.tensor(), mine), "all_gather in place");
        expectSame(in_place, want, "in place");
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, GatherAndScatterWithEveryRoot) {
  constexpr int64_t kCount = 4;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        const DType dtype = DType::kFloat16;
        for (int root = 0; root < n; ++root) {
          const Buffer input = inputOf(dtype, group.rank(), kCount, root);
          std::vector<Buffer> outputs;
          std::vector<Tensor> views;
          if (group.rank() == root) {
            for (int r = 0; r < n; ++r) outputs.emplace_back(dtype, std::vector<int64_t>{kCount});
            for (Buffer& output : outputs) views.push_back(output.tensor());
          }
          run(group.gather(views, input.tensor(), {.root = root}), "gather");
          for (size_t r = 0; r < outputs.size(); ++r) {
            expectSame(outputs[r], inputOf(dtype, static_cast<int>(r), kCount, root),
                       absl::StrCat("gather to ", root));
          }

          std::vector<Buffer> inputs;
          std::vector<Tensor> sources;
          if (group.rank() == root) {
            for (int r = 0; r < n; ++r) inputs.push_back(inputOf(dtype, r, kCount, root + 7));
            for (Buffer& in : inputs) sources.push_back(in.tensor());
          }
          Buffer output(dtype, std::vector<int64_t>{kCount});
          run(group.scatter(output.tensor(), sources, {.root = root}), "scatter");
          expectSame(output, inputOf(dtype, group.rank(), kCount, root + 7),
                     absl::StrCat("scatter from ", root));
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, AllToAllListWithUnevenSizes) {
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        const int me = group.rank();
        const DType dtype = DType::kInt64;
        // Rank s sends s + d + 1 elements to rank d, value 100 * s + d.
        std::vector<Buffer> inputs, outputs;
        std::vector<Tensor> in_views, out_views;
        for (int d = 0; d < n; ++d) {
          inputs.push_back(Buffer::of(dtype, std::vector<double>(me + d + 1, 100.0 * me + d)));
          outputs.emplace_back(dtype, std::vector<int64_t>{d + me + 1});
        }
        for (Buffer& b : inputs) in_views.push_back(b.tensor());
        for (Buffer& b : outputs) out_views.push_back(b.tensor());
        run(group.allToAll(out_views, in_views), "all_to_all");
        for (int s = 0; s < n; ++s) {
          expectSame(outputs[s], Buffer::of(dtype, std::vector<double>(s + me + 1, 100.0 * s + me)),
                     absl::StrCat("all_to_all from ", s, " on ", me));
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, AllToAllSingleEvenAndUneven) {
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        const int me = group.rank();
        const DType dtype = DType::kFloat32;
        // Equal splits of 2-row blocks with 3 columns.
        Buffer input(dtype, std::vector<int64_t>{2 * n, 3});
        for (int64_t i = 0; i < input.numel(); ++i)
          input.set(i, 1000.0 * me + static_cast<double>(i));
        Buffer output(dtype, std::vector<int64_t>{2 * n, 3});
        run(group.allToAllSingle(output.tensor(), input.tensor()), "all_to_all_single even");
        for (int s = 0; s < n; ++s) {
          for (int64_t k = 0; k < 6; ++k) {
            EXPECT_EQ(output.at(s * 6 + k), 1000.0 * s + me * 6 + static_cast<double>(k))
                << "even, from " << s << " on " << me;
          }
        }

        // Rank s sends (s + d) % 3 rows to rank d, including empty ones.
        std::vector<int64_t> in_splits, out_splits;
        for (int d = 0; d < n; ++d) in_splits.push_back((me + d) % 3);
        for (int s = 0; s < n; ++s) out_splits.push_back((s + me) % 3);
        int64_t in_rows = 0, out_rows = 0;
        for (int64_t rows : in_splits) in_rows += rows;
        for (int64_t rows : out_splits) out_rows += rows;
        Buffer uneven_in(dtype, std::vector<int64_t>{in_rows, 2});
        int64_t row = 0;
        for (int d = 0; d < n; ++d) {
          for (int64_t k = 0; k < in_splits[d]; ++k, ++row) {
            uneven_in.set(row * 2, 100.0 * me + d);
            uneven_in.set(row * 2 + 1, static_cast<double>(k));
          }
        }
        Buffer uneven_out(dtype, std::vector<int64_t>{out_rows, 2});
        run(group.allToAllSingle(uneven_out.tensor(), uneven_in.tensor(), out_splits, in_splits),
            "all_to_all_single uneven");
        row = 0;
        for (int s = 0; s < n; ++s) {
          for (int64_t k = 0; k < out_splits[s]; ++k, ++row) {
            EXPECT_EQ(uneven_out.at(row * 2), 100.0 * s + me) << "uneven, from " << s;
            EXPECT_EQ(uneven_out.at(row * 2 + 1), static_cast<double>(k)) << "uneven, from " << s;
          }
        }
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, BarrierAndEmptyTensors) {
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        run(group.barrier(), "barrier");
        Buffer empty(DType::kFloat32, std::vector<int64_t>{0});
        run(group.allReduce(empty.tensor()), "all_reduce of nothing");
        run(group.broadcast(empty.tensor()), "broadcast of nothing");
        Buffer empty_out(DType::kFloat32, std::vector<int64_t>{0});
        run(group.allGatherIntoTensor(empty_out.tensor(), empty.tensor()), "all_gather of nothing");
        run(group.reduceScatterTensor(empty.tensor(), empty_out.tensor()),
            "reduce_scatter of nothing");
        Buffer rows(DType::kFloat32, std::vector<int64_t>{0, 4});
        run(group.allToAllSingle(rows.tensor(), rows.tensor(),
                                 std::vector<int64_t>(group.size(), 0),
                                 std::vector<int64_t>(group.size(), 0)),
            "all_to_all_single of nothing");
        run(group.barrier(), "barrier");
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, SendRecvAroundTheRingAndBatchedExchange) {
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        const int n = group.size();
        const int me = group.rank();
        const int right = (me + 1) % n;
        const int left = (me + n - 1) % n;
        // Every rank sends before it receives: sends are posted, not blocking.
        Buffer out = Buffer::of(DType::kFloat32, std::vector<double>(5, me));
        Buffer in(DType::kFloat32, std::vector<int64_t>{5});
        absl::StatusOr<std::shared_ptr<Work>> sent = group.send(out.tensor(), right, {.tag = 3});
        run(group.recv(in.tensor(), left, {.tag = 3}), "recv");
        run(sent, "send");
        expectSame(in, Buffer::of(DType::kFloat32, std::vector<double>(5, left)), "ring");

        // Everyone exchanges with everyone in one batch, tags telling two
        // messages to the same peer apart.
        std::vector<Buffer> sends, recvs;
        std::vector<P2POp> ops;
        for (int peer = 0; peer < n; ++peer) {
          if (peer == me) continue;
          for (int tag = 0; tag < 2; ++tag) {
            sends.push_back(
                Buffer::of(DType::kInt32, std::vector<double>(3, 100 * me + 10 * peer + tag)));
            recvs.emplace_back(DType::kInt32, std::vector<int64_t>{3});
          }
        }
        size_t k = 0;
        for (int peer = 0; peer < n; ++peer) {
          if (peer == me) continue;
          for (int tag = 0; tag < 2; ++tag, ++k) {
            ops.push_back({P2POp::Kind::kRecv, recvs[k].tensor(), peer, 1 - tag});
            ops.push_back({P2POp::Kind::kSend, sends[k].tensor(), peer, tag});
          }
        }
        absl::StatusOr<std::vector<std::shared_ptr<Work>>> works = group.batchIsendIrecv(ops);
        ASSERT_TRUE(works.ok()) << works.status();
        for (auto& work : *works) EXPECT_TRUE(work->wait().ok()) << work->exception();
        k = 0;
        for (int peer = 0; peer < n; ++peer) {
          if (peer == me) continue;
          for (int tag = 0; tag < 2; ++tag, ++k) {
            // recvs[k] was posted with tag 1 - tag.
            expectSame(
                recvs[k],
                Buffer::of(DType::kInt32, std::vector<double>(3, 100 * peer + 10 * me + 1 - tag)),
                absl::StrCat("batch from ", peer));
          }
        }
      },
      quickOptions());
}

// Calls start in issue order and may overlap (gloo runs two at a time, as
// c10d's); a barrier orders after every call issued before it.
TEST_P(ProcessGroupTest, SeveralOutstandingWorksCompleteBeforeALaterBarrier) {
  constexpr int kCalls = 6;
  constexpr int64_t kCount = 1 << 16;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        std::vector<Buffer> buffers, gathered;
        for (int k = 0; k < kCalls; ++k) {
          buffers.push_back(inputOf(DType::kFloat32, group.rank(), kCount, k));
          gathered.emplace_back(DType::kFloat32, std::vector<int64_t>{kCount * group.size()});
        }
        std::vector<std::shared_ptr<Work>> works;
        for (int k = 0; k < kCalls; ++k) {
          // All-reduces, all-gathers of their results and all-reduces of the
          // (zero) gather buffers, interleaved, all outstanding at the barrier.
          absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(buffers[k].tensor());
          ASSERT_TRUE(work.ok()) << work.status();
          EXPECT_EQ((*work)->info().seq, static_cast<uint64_t>(2 * k + 1));
          works.push_back(*work);
          if (k % 2 == 0) {
            ASSERT_TRUE(works.back()->wait().ok());
            work = group.allGatherIntoTensor(gathered[k].tensor(), buffers[k].tensor());
            ASSERT_TRUE(work.ok()) << work.status();
            works.push_back(*work);
          } else {
            work = group.allReduce(gathered[k].tensor());  // zeros stay zeros
            ASSERT_TRUE(work.ok()) << work.status();
            works.push_back(*work);
          }
        }
        absl::StatusOr<std::shared_ptr<Work>> barrier = group.barrier();
        ASSERT_TRUE(barrier.ok()) << barrier.status();
        ASSERT_TRUE((*barrier)->wait().ok());
        for (size_t w = 0; w < works.size(); ++w) {
          EXPECT_TRUE(works[w]->isCompleted()) << "call " << w << " after the barrier";
          EXPECT_TRUE(works[w]->wait().ok());
        }
        for (int k = 0; k < kCalls; ++k) {
          const Buffer want =
              expectedReduction(ReduceOp::kSum, DType::kFloat32, group.size(), kCount, k);
          expectSame(buffers[k], want, absl::StrCat("call ", k));
          if (k % 2 == 0) {
            for (int r = 0; r < group.size(); ++r) {
              for (int64_t i = 0; i < kCount; i += 4097) {
                EXPECT_EQ(gathered[k].at(r * kCount + i), want.at(i))
                    << "gather " << k << " rank " << r;
              }
            }
          }
        }
      },
      quickOptions());
}

// Two calls on one buffer never overlap, waited or not: the second
// all-reduce sums what the first one wrote.
TEST_P(ProcessGroupTest, CallsOnOneBufferKeepTheirOrder) {
  constexpr int64_t kCount = 1 << 14;
  runRanks(
      size(),
      [&](ProcessGroup& group) {
        Buffer buffer = inputOf(DType::kFloat32, group.rank(), kCount, 0);
        Buffer other = inputOf(DType::kFloat32, group.rank(), kCount, 1);
        absl::StatusOr<std::shared_ptr<Work>> first = group.allReduce(buffer.tensor());
        absl::StatusOr<std::shared_ptr<Work>> second = group.allReduce(buffer.tensor());
        absl::StatusOr<std::shared_ptr<Work>> unrelated = group.allReduce(other.tensor());
        ASSERT_TRUE(first.ok() && unrelated.ok() && second.ok());
        ASSERT_TRUE((*second)->wait().ok());
        ASSERT_TRUE((*first)->wait().ok());
        ASSERT_TRUE((*unrelated)->wait().ok());
        const Buffer once =
            expectedReduction(ReduceOp::kSum, DType::kFloat32, group.size(), kCount, 0);
        for (int64_t i = 0; i < kCount; ++i) {
          ASSERT_EQ(buffer.at(i), once.at(i) * group.size()) << i;
        }
        expectSame(other,
                   expectedReduction(ReduceOp::kSum, DType::kFloat32, group.size(), kCount, 1),
                   "the unrelated call");
      },
      quickOptions());
}

TEST_P(ProcessGroupTest, SubgroupsFollowTheListedOrder) {
  runRanks(
      size(),
      [&](ProcessGroup& world) {
        const int n = world.size();
        // The reverse of the world: group rank i is world rank n - 1 - i.
        std::vector<int> reversed;
        for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
        absl::StatusOr<std::shared_ptr<ProcessGroup>> group = world.newGroup(reversed);
        ASSERT_TRUE(group.ok()) << group.status();
        ASSERT_NE(*group, nullptr);
        EXPECT_EQ((*group)->rank(), n - 1 - world.rank());
        EXPECT_EQ((*group)->globalRanks(), reversed);
        EXPECT_EQ((*group)->name(), "default/1");
        Buffer into(DType::kInt32, std::vector<int64_t>{n});
        Buffer mine =
            Buffer::of(DType::kInt32, std::vector<double>{static_cast<double>(world.rank())});
        run((*group)->allGatherIntoTensor(into.tensor(), mine.tensor()), "all_gather in subgroup");
        expectSame(into,
                   Buffer::of(DType::kInt32, std::vector<double>(reversed.begin(), reversed.end())),
                   "gathered in group order");

        // Even ranks only; odd ranks get no group.
        std::vector<int> evens;
        for (int r = 0; r < n; r += 2) evens.push_back(r);
        absl::StatusOr<std::shared_ptr<ProcessGroup>> even = world.newGroup(evens, "evens");
        ASSERT_TRUE(even.ok()) << even.status();
        EXPECT_EQ(*even == nullptr, world.rank() % 2 == 1);
        if (*even != nullptr) {
          EXPECT_EQ((*even)->name(), "evens");
          Buffer value =
              Buffer::of(DType::kInt64, std::vector<double>{static_cast<double>(world.rank())});
          run((*even)->allReduce(value.tensor(), {.op = ReduceOp::kMax}), "max over evens");
          EXPECT_EQ(value.at(0), evens.back());
        }
      },
      quickOptions());
}

// PyTorch's documented subgroup example: all_reduce MAX over ranks [0, 2].
TEST(ProcessGroupDocExamplesTest, MaxOverRanksZeroAndTwo) {
  runRanks(
      4,
      [&](ProcessGroup& world) {
        absl::StatusOr<std::shared_ptr<ProcessGroup>> group = world.newGroup({0, 2});
        ASSERT_TRUE(group.ok()) << group.status();
        if (*group == nullptr) return;
        Buffer tensor =
            Buffer::of(DType::kInt64, std::vector<double>{static_cast<double>(world.rank())});
        run((*group)->allReduce(tensor.tensor(), {.op = ReduceOp::kMax}), "max");
        EXPECT_EQ(tensor.at(0), 2);
      },
      quickOptions());
}

// A helper for the argument-check table: one rank, no peers needed.
void expectRejected(ProcessGroup& group, const absl::StatusOr<std::shared_ptr<Work>>& work,
                    const std::vector<std::string>& phrases) {
  ASSERT_FALSE(work.ok()) << "accepted; expected an error with " << phrases[0];
  EXPECT_EQ(work.status().code(), absl::StatusCode::kInvalidArgument) << work.status();
  EXPECT_EQ(errorKind(work.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(work.status().message()),
              HasSubstr(absl::StrCat("in group default (rank ", group.rank(), " of 2)")));
  for (const std::string& phrase : phrases) {
    EXPECT_THAT(std::string(work.status().message()), HasSubstr(phrase));
  }
}

TEST(ProcessGroupArgumentsTest, BadCallsFailAtOnceNamingOpArgumentAndValues) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer f32(DType::kFloat32, std::vector<int64_t>{4});
        Buffer f32_3(DType::kFloat32, std::vector<int64_t>{3});
        Buffer i32(DType::kInt32, std::vector<int64_t>{4});
        Buffer boolean(DType::kBool, std::vector<int64_t>{4});
        Buffer eight(DType::kFloat32, std::vector<int64_t>{8});
        Buffer rows(DType::kFloat32, std::vector<int64_t>{3, 2});
        Buffer rows_other(DType::kFloat32, std::vector<int64_t>{3, 5});
        expectRejected(group, group.broadcast(f32.tensor(), {.root = 2}),
                       {"broadcast", "root is 2", "ranks 0 to 1"});
        expectRejected(group, group.reduce(f32.tensor(), {.root = -1}), {"reduce", "root is -1"});
        expectRejected(group, group.allReduce(f32.tensor(), {.op = ReduceOp::kBand}),
                       {"all_reduce", "band", "f32"});
        expectRejected(group, group.allReduce(boolean.tensor(), {.op = ReduceOp::kAvg}),
                       {"all_reduce", "avg", "bool"});
        expectRejected(group, group.allGather({f32.tensor()}, f32.tensor()),
                       {"all_gather", "outputs has 1 tensors", "2 ranks"});
        expectRejected(group, group.allGather({f32.tensor(), i32.tensor()}, f32.tensor()),
                       {"all_gather", "output 1", "i32[4]", "must be f32"});
        // Outputs may differ in size (uneven all_gather), but not this rank's.
        expectRejected(group, group.allGather({f32_3.tensor(), f32_3.tensor()}, f32.tensor()),
                       {absl::StrCat("output ", group.rank()), "3 elements", "4 elements"});
        expectRejected(group, group.allGatherIntoTensor(f32.tensor(), f32.tensor()),
                       {"all_gather_into_tensor", "output", "8 elements"});
        expectRejected(group, group.reduceScatterTensor(f32.tensor(), f32.tensor()),
                       {"reduce_scatter_tensor", "input", "8 elements"});
        expectRejected(group,
                       group.reduceScatter(f32.tensor(), {f32.tensor(), f32.tensor()},
                                           {.op = ReduceOp::kBxor}),
                       {"reduce_scatter", "bxor"});
        if (group.rank() == 1) {
          expectRejected(group, group.gather({f32.tensor(), f32.tensor()}, f32.tensor()),
                         {"gather", "not the root (0)"});
          expectRejected(group, group.scatter(f32.tensor(), {f32.tensor(), f32.tensor()}),
                         {"scatter", "not the root (0)"});
        } else {
          expectRejected(group, group.gather({f32.tensor()}, f32.tensor()),
                         {"gather", "outputs has 1"});
          expectRejected(group, group.scatter(f32.tensor(), {f32.tensor(), f32_3.tensor()}),
                         {"scatter", "input 1"});
        }
        expectRejected(group,
                       group.allToAll({f32.tensor(), f32.tensor()}, {f32.tensor(), i32.tensor()}),
                       {"all_to_all", "input 1", "i32"});
        expectRejected(group, group.allToAllSingle(rows.tensor(), rows.tensor()),
                       {"all_to_all_single", "3 rows", "do not split evenly"});
        expectRejected(group, group.allToAllSingle(rows.tensor(), rows.tensor(), {1, 2}, {1, 1}),
                       {"input_splits [1, 1] sum to 2", "3 rows"});
        expectRejected(group, group.allToAllSingle(rows.tensor(), rows.tensor(), {1, 2}, {1, 1, 1}),
                       {"input_splits has 3 entries"});
        expectRejected(group, group.allToAllSingle(rows.tensor(), rows.tensor(), {1, 2}, {4, -1}),
                       {"negative"});
        expectRejected(group,
                       group.allToAllSingle(rows_other.tensor(), rows.tensor(), {1, 2}, {1, 2}),
                       {"rows", "same shape"});
        expectRejected(group, group.send(f32.tensor(), group.rank()), {"send", "dst is this rank"});
        expectRejected(group, group.recv(f32.tensor(), 5), {"recv", "src is 5"});
        expectRejected(group, group.send(f32.tensor(), 1 - group.rank(), {.tag = -1}),
                       {"tag is -1"});
        const Tensor no_memory(nullptr, DType::kFloat32, {4});
        expectRejected(group, group.allReduce(no_memory), {"no memory"});
        const Tensor on_gpu(f32.tensor().data(), DType::kFloat32, {4}, Device::cuda(0));
        expectRejected(group, group.allGather({f32.tensor(), on_gpu}, f32.tensor()),
                       {"output 1", "cuda:0", "on cpu"});
        absl::StatusOr<std::vector<std::shared_ptr<Work>>> batch =
            group.batchIsendIrecv({{P2POp::Kind::kSend, f32.tensor(), 1 - group.rank(), 0},
                                   {P2POp::Kind::kRecv, f32.tensor(), 7, 0}});
        EXPECT_THAT(batch.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                             AllOf(HasSubstr("batch_isend_irecv op 1 (recv)"),
                                                   HasSubstr("peer is 7"))));
        // Rejected calls take no sequence number: the next call is still #1.
        absl::StatusOr<std::shared_ptr<Work>> barrier = group.barrier();
        ASSERT_TRUE(barrier.ok()) << barrier.status();
        EXPECT_EQ((*barrier)->info().seq, 1u);
        EXPECT_TRUE((*barrier)->wait().ok());
      },
      quickOptions());
}

TEST(ProcessGroupArgumentsTest, NewGroupChecksItsRankList) {
  runRanks(
      2,
      [&](ProcessGroup& world) {
        EXPECT_THAT(world.newGroup({}).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty")));
        EXPECT_THAT(world.newGroup({0, 2}).status(),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a listed rank is 2")));
        EXPECT_THAT(world.newGroup({1, 1}).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                              HasSubstr("rank 1 is listed twice")));
      },
      quickOptions());
}

// Creates a group on `size` threads, rank r with options_of(r), and returns
// each rank's result.
std::vector<absl::Status> createAll(int size, const std::shared_ptr<Store>& store,
                                    const std::function<ProcessGroupOptions(int)>& options_of,
                                    const std::vector<int>& ranks_to_start = {}) {
  registerAllBackends();
  std::vector<int> starting = ranks_to_start;
  if (starting.empty()) {
    for (int r = 0; r < size; ++r) starting.push_back(r);
  }
  std::vector<absl::Status> results(size);
  std::vector<std::thread> threads;
  for (int r : starting) {
    threads.emplace_back(
        [&, r] { results[r] = ProcessGroup::create(store, r, size, options_of(r)).status(); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(ProcessGroupCreateTest, RanksWithDifferentOptionsAllFailNamingTheOther) {
  auto store = std::make_shared<HashStore>(absl::Seconds(10));
  std::vector<absl::Status> results = createAll(2, store, [](int rank) {
    ProcessGroupOptions options = quickOptions(absl::Seconds(rank == 0 ? 20 : 21));
    return options;
  });
  EXPECT_THAT(results[0], StatusIs(absl::StatusCode::kInvalidArgument,
                                   AllOf(HasSubstr("rank 1 created it with"),
                                         HasSubstr("timeout=21s"), HasSubstr("timeout=20s"))));
  EXPECT_THAT(results[1],
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 0 created it with")));
}

TEST(ProcessGroupCreateTest, MissingRanksAreNamedAfterTheTimeout) {
  auto store = std::make_shared<HashStore>(absl::Seconds(10));
  const absl::Time start = absl::Now();
  std::vector<absl::Status> results =
      createAll(4, store, [](int) { return quickOptions(absl::Milliseconds(300)); }, {0, 2});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (int r : {0, 2}) {
    EXPECT_THAT(results[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     AllOf(HasSubstr("creating group default"),
                                           HasSubstr("rank(s) [1, 3] never joined"))));
  }
}

TEST(ProcessGroupCreateTest, AGroupNameIsUsedOncePerStore) {
  auto store = std::make_shared<HashStore>(absl::Seconds(10));
  auto options = [](int) { return quickOptions(); };
  for (const absl::Status& status : createAll(2, store, options))
    EXPECT_TRUE(status.ok()) << status;
  for (const absl::Status& status : createAll(2, store, options)) {
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kAlreadyExists,
                                 HasSubstr("already created a group named 'default'")));
  }
  auto renamed = [](int) {
    ProcessGroupOptions options = quickOptions();
    options.group_name = "second";
    return options;
  };
  for (const absl::Status& status : createAll(2, store, renamed))
    EXPECT_TRUE(status.ok()) << status;
}

TEST(ProcessGroupCreateTest, BadArgumentsAndUnknownBackends) {
  auto store = std::make_shared<HashStore>(absl::Seconds(1));
  EXPECT_THAT(ProcessGroup::create(store, 2, 2, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got rank 2, size 2")));
  EXPECT_THAT(ProcessGroup::create(nullptr, 0, 1, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("store is null")));
  ProcessGroupOptions options;
  options.timeout = absl::ZeroDuration();
  EXPECT_THAT(ProcessGroup::create(store, 0, 1, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("timeout must be positive")));
  options = quickOptions();
  options.cpu_backend = "ucc";
  options.group_name = "ucc";
  EXPECT_THAT(ProcessGroup::create(store, 0, 1, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown backend 'ucc'")));
  options.cpu_backend = "gloo";
  options.group_name = "env";
  setenv("LOOM_COMM_CHECKS", "loud", 1);
  const absl::Status env = ProcessGroup::create(store, 0, 1, options).status();
  unsetenv("LOOM_COMM_CHECKS");
  EXPECT_THAT(
      env, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("LOOM_COMM_CHECKS is 'loud'")));
}

TEST(ProcessGroupCreateTest, NewGroupCallsThatDifferAcrossRanksFail) {
  runRanks(
      2,
      [&](ProcessGroup& world) {
        const std::vector<int> ranks =
            world.rank() == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
        const absl::Status status = world.newGroup(ranks).status();
        // The rank that comes second sees the mismatch; the first one waits for
        // a peer that never joins.
        EXPECT_FALSE(status.ok());
        if (status.code() == absl::StatusCode::kInvalidArgument) {
          EXPECT_THAT(std::string(status.message()), HasSubstr("another rank asked for ranks ["));
        } else {
          EXPECT_THAT(status,
                      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("never joined")));
        }
      },
      quickOptions(absl::Milliseconds(500)));
}

ProcessGroupOptions uncheckedOptions(absl::Duration timeout = absl::Seconds(20)) {
  ProcessGroupOptions options = quickOptions(timeout);
  options.checks = CollectiveChecks::kOff;
  return options;
}

// Without checks, the engine itself times out.
TEST(ProcessGroupFailureTest, ACallARankNeverMakesTimesOutNamingGroupRankOpAndSequence) {
  absl::Notification failed;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer buffer(DType::kFloat32, std::vector<int64_t>{16});
        if (group.rank() == 0) {
          run(group.barrier(), "barrier");
          const absl::Time start = absl::Now();
          absl::StatusOr<std::shared_ptr<Work>> work =
              group.allReduce(buffer.tensor(), {.timeout = absl::Milliseconds(400)});
          ASSERT_TRUE(work.ok());
          EXPECT_THAT((*work)->wait(),
                      StatusIs(absl::StatusCode::kDeadlineExceeded,
                               HasSubstr("all_reduce #2 in group default (rank 0 of 2)")));
          EXPECT_LT(absl::Now() - start, absl::Seconds(3));
          EXPECT_FALSE((*work)->isSuccess());
          EXPECT_EQ(errorKind((*work)->exception()), ErrorKind::kTimeout);
          // The group is unusable now, and says why.
          EXPECT_THAT(group.barrier().status(),
                      StatusIs(absl::StatusCode::kAborted,
                               AllOf(HasSubstr("barrier #3"), HasSubstr("earlier failure"),
                                     HasSubstr("all_reduce #2"))));
          failed.Notify();
        } else {
          run(group.barrier(), "barrier");
          failed.WaitForNotification();
          // Rank 0 closed its connections: this rank's next call fails at once
          // instead of waiting out its timeout.
          const absl::Time start = absl::Now();
          absl::StatusOr<std::shared_ptr<Work>> work = group.barrier();
          if (work.ok()) {
            EXPECT_FALSE((*work)->wait().ok());
          }
          EXPECT_LT(absl::Now() - start, absl::Seconds(10));
        }
      },
      uncheckedOptions());
}

// The outcome of a call: the error it returned, or what its Work ended
// with. Checked CPU calls report the checks' verdict through the Work.
absl::Status outcome(const absl::StatusOr<std::shared_ptr<Work>>& work) {
  return work.ok() ? (*work)->wait() : work.status();
}

// With checks, the check before the call times out first and names the
// rank that never came.
TEST(ProcessGroupFailureTest, ChecksNameTheRankThatSkippedACall) {
  absl::Notification done;
  runRanks(
      3,
      [&](ProcessGroup& group) {
        run(group.barrier(), "barrier");
        if (group.rank() == 1) {
          done.WaitForNotification();
          return;
        }
        Buffer buffer(DType::kFloat32, std::vector<int64_t>{4});
        EXPECT_THAT(outcome(group.allReduce(buffer.tensor())),
                    StatusIs(absl::StatusCode::kDeadlineExceeded,
                             AllOf(HasSubstr(absl::StrCat("rank ", group.rank(),
                                                          " of 3: all_reduce #2 "
                                                          "in group default")),
                                   HasSubstr("rank 1 did not reach it"))));
        if (group.rank() == 0) done.Notify();
      },
      quickOptions(absl::Milliseconds(500)));
}

TEST(ProcessGroupFailureTest, ChecksReportMismatchedCallsOnEveryRank) {
  runRanks(
      3,
      [&](ProcessGroup& group) {
        Buffer f32(DType::kFloat32, std::vector<int64_t>{4});
        Buffer i32(DType::kInt32, std::vector<int64_t>{4});
        // Rank 2 broadcasts while the others all-reduce.
        EXPECT_THAT(outcome(group.rank() == 2 ? group.broadcast(f32.tensor())
                                              : group.allReduce(f32.tensor())),
                    StatusIs(absl::StatusCode::kInvalidArgument,
                             AllOf(HasSubstr("collective mismatch in group default at call #1"),
                                   HasSubstr("broadcast"), HasSubstr("all_reduce"))));
        // Rank 0 passes i32 where the others pass f32.
        EXPECT_THAT(
            outcome(group.allReduce(group.rank() == 0 ? i32.tensor() : f32.tensor())),
            StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("#2"), HasSubstr("i32"))));
        // The checks left the group usable.
        run(group.allReduce(f32.tensor()), "all_reduce after the mismatches");
      },
      quickOptions());
}

TEST(ProcessGroupFailureTest, DetailChecksCompareShapes) {
  ProcessGroupOptions options = quickOptions();
  options.checks = CollectiveChecks::kDetail;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        // Same dtype and element count, different shapes.
        Buffer tensor(DType::kFloat32,
                      group.rank() == 0 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{3, 2});
        EXPECT_THAT(outcome(group.allReduce(tensor.tensor())),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[2, 3]")));
      },
      options);
}

TEST(ProcessGroupFailureTest, TheEnvironmentOverridesTheChecksOption) {
  setenv("LOOM_COMM_CHECKS", "detail", 1);
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer tensor(DType::kInt8,
                      group.rank() == 0 ? std::vector<int64_t>{4, 1} : std::vector<int64_t>{1, 4});
        EXPECT_THAT(outcome(group.allReduce(tensor.tensor())),
                    StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[4, 1]")));
      },
      uncheckedOptions());
  unsetenv("LOOM_COMM_CHECKS");
}

TEST(ProcessGroupFailureTest, ATimeoutDumpsTheFlightRecorder) {
  const std::string dir = ::testing::TempDir();
  setenv("LOOM_FLIGHT_RECORDER_DIR", dir.c_str(), 1);
  absl::Notification failed;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        absl::StatusOr<std::shared_ptr<ProcessGroup>> sub = group.newGroup({0, 1}, "mesh/tp/0");
        ASSERT_TRUE(sub.ok()) << sub.status();
        run((*sub)->barrier(), "barrier");
        if (group.rank() == 1) {
          failed.WaitForNotification();
          return;
        }
        Buffer buffer(DType::kFloat32, std::vector<int64_t>{4});
        absl::StatusOr<std::shared_ptr<Work>> work =
            (*sub)->allReduce(buffer.tensor(), {.timeout = absl::Milliseconds(300)});
        ASSERT_TRUE(work.ok()) << work.status();
        EXPECT_EQ(errorKind((*work)->wait()), ErrorKind::kTimeout);
        failed.Notify();
      },
      uncheckedOptions());
  unsetenv("LOOM_FLIGHT_RECORDER_DIR");
  std::ifstream dump(dir + "/mesh_tp_0_rank0.json");
  ASSERT_TRUE(dump.good()) << "no dump in " << dir;
  const std::string text((std::istreambuf_iterator<char>(dump)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("all_reduce"));
  EXPECT_THAT(text, HasSubstr("barrier"));
  EXPECT_FALSE(std::ifstream(dir + "/mesh_tp_0_rank1.json").good());
}

// Checked CPU calls return at once: the check runs on the issuer's thread,
// so a caller can overlap its compute with a peer that is still on its way.
TEST(ProcessGroupChecksTest, ACheckedCallDoesNotBlockTheCaller) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer buffer = Buffer::of(DType::kFloat32, {1.0 + group.rank(), 10.0});
        if (group.rank() == 1) absl::SleepFor(absl::Milliseconds(400));
        const absl::Time start = absl::Now();
        absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(buffer.tensor());
        ASSERT_TRUE(work.ok()) << work.status();
        if (group.rank() == 0) {
          EXPECT_LT(absl::Now() - start, absl::Milliseconds(300))
              << "issuing waited for the peer's check";
          EXPECT_FALSE((*work)->isCompleted());
        }
        ASSERT_TRUE((*work)->wait().ok());
        EXPECT_EQ(buffer.at(0), 3.0);
        EXPECT_EQ(buffer.at(1), 20.0);
      },
      quickOptions());
}

// A call given up on while it waits for its check never reaches the
// engine: its peer's call, checked and issued, finds no partner.
TEST(ProcessGroupChecksTest, AbortingACallInItsCheckCancelsIt) {
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer first = Buffer::of(DType::kFloat32, {1.0});
        if (group.rank() == 1) absl::SleepFor(absl::Milliseconds(300));
        absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(first.tensor());
        ASSERT_TRUE(work.ok()) << work.status();
        if (group.rank() == 0) {
          (*work)->abort();
          EXPECT_THAT((*work)->wait(),
                      StatusIs(absl::StatusCode::kAborted, HasSubstr("all_reduce #1")));
        } else {
          // The peer's call went ahead alone; it fails or times out.
          EXPECT_FALSE((*work)->wait(absl::Milliseconds(500)).ok());
        }
      },
      quickOptions(absl::Seconds(5)));
}

// abort() also ends calls still waiting for their cross-rank check.
TEST(ProcessGroupChecksTest, AbortFailsCallsInTheirCheck) {
  absl::Notification aborted;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer buffer(DType::kFloat32, std::vector<int64_t>{16});
        if (group.rank() == 1) {
          aborted.WaitForNotification();  // never joins
          return;
        }
        absl::StatusOr<std::shared_ptr<Work>> first = group.allReduce(buffer.tensor());
        absl::StatusOr<std::shared_ptr<Work>> second = group.allReduce(buffer.tensor());
        ASSERT_TRUE(first.ok() && second.ok());
        absl::SleepFor(absl::Milliseconds(50));
        const absl::Time start = absl::Now();
        group.abort();
        EXPECT_THAT((*first)->wait(),
                    StatusIs(absl::StatusCode::kAborted, HasSubstr("all_reduce #1")));
        EXPECT_THAT((*second)->wait(),
                    StatusIs(absl::StatusCode::kAborted, HasSubstr("all_reduce #2")));
        EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "the abort waited for the check";
        aborted.Notify();
      },
      quickOptions(absl::Seconds(5)));
}

TEST(ProcessGroupFailureTest, AbortFailsOutstandingWork) {
  absl::Notification aborted;
  runRanks(
      2,
      [&](ProcessGroup& group) {
        Buffer buffer(DType::kFloat32, std::vector<int64_t>{16});
        if (group.rank() == 1) {
          // Never joins the all_reduce, and keeps its connections open until
          // rank 0 has seen the abort.
          aborted.WaitForNotification();
          return;
        }
        absl::StatusOr<std::shared_ptr<Work>> work = group.allReduce(buffer.tensor());
        ASSERT_TRUE(work.ok());
        group.abort();
        EXPECT_THAT((*work)->wait(absl::Seconds(5)),
                    StatusIs(absl::StatusCode::kAborted, HasSubstr("all_reduce #1")));
        aborted.Notify();
      },
      uncheckedOptions(absl::Seconds(2)));
}

TEST(ProcessGroupFailureTest, MonitoredBarrierNamesTheRanksThatDidNotArrive) {
  runRanks(
      4,
      [&](ProcessGroup& group) {
        EXPECT_TRUE(group.monitoredBarrier(absl::Seconds(10)).ok());
        if (group.rank() == 1 || group.rank() == 3) return;
        EXPECT_THAT(group.monitoredBarrier(absl::Milliseconds(300), /*wait_all_ranks=*/true),
                    StatusIs(absl::StatusCode::kDeadlineExceeded,
                             AllOf(HasSubstr("monitored_barrier #2"),
                                   HasSubstr("ranks 1, 3 did not arrive"))));
      },
      quickOptions());
  runRanks(
      3,
      [&](ProcessGroup& group) {
        if (group.rank() == 1) return;
        // PyTorch's default: wait_all_ranks false, the first missing rank.
        EXPECT_THAT(group.monitoredBarrier(absl::Milliseconds(300)),
                    StatusIs(absl::StatusCode::kDeadlineExceeded,
                             AllOf(HasSubstr("rank 1 did not arrive"),
                                   HasSubstr("the first missing rank"))));
      },
      quickOptions());
}

}  // namespace
}  // namespace loom::comm
