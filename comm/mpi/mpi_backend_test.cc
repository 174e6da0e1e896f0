// Tests of the mpi backend as N real processes: run_under_mpirun.sh starts
// this binary under mpirun (2, 3 and 4 ranks), every rank runs every test in
// the same order so the collectives line up, and mpirun's exit status is the
// verdict. The backend is driven directly, as the ProcessGroup front end
// would: a BackendContext per group and hand-made CollectiveInfo.
#include "comm/mpi/mpi_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/file_store.h"
#include "comm/half_float.h"
#include "comm/nccl/cuda_util.h"
#include "comm/prefix_store.h"
#include "comm/testing/collective_exactness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::comm::mpi {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Long enough for 4 oversubscribed ranks on 2 cores; short enough that a
// broken test fails inside mpirun's --timeout instead of hanging.
constexpr absl::Duration kTimeout = absl::Seconds(20);

// The launcher's view of this process, as the front end gets it.
int envInt(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) {
    ADD_FAILURE() << name << " is not set; run this test under mpirun (run_under_mpirun.sh)";
    return 0;
  }
  return std::atoi(value);
}
int worldRank() { return envInt("OMPI_COMM_WORLD_RANK"); }
int worldSize() { return envInt("OMPI_COMM_WORLD_SIZE"); }

std::shared_ptr<Store> jobStore() {
  static std::shared_ptr<Store>* const kStore = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    absl::StatusOr<std::unique_ptr<FileStore>> store =
        FileStore::open(absl::StrCat(dir ? dir : "/tmp", "/mpi_backend_test_store"), kTimeout);
    if (!store.ok()) {
      ADD_FAILURE() << store.status();
      return new std::shared_ptr<Store>();
    }
    return new std::shared_ptr<Store>(std::move(*store));
  }();
  return *kStore;
}

std::vector<int> allRanks() {
  std::vector<int> ranks;
  for (int r = 0; r < worldSize(); ++r) ranks.push_back(r);
  return ranks;
}

// The context of group `name` over `global_ranks` (this process must be a
// member), with its own namespace in the job's store.
BackendContext contextFor(const std::string& name, const std::vector<int>& global_ranks,
                          absl::Duration timeout = kTimeout) {
  BackendContext context;
  context.store = std::make_shared<PrefixStore>(absl::StrCat(name, "/mpi"), jobStore());
  context.size = static_cast<int>(global_ranks.size());
  for (int r = 0; r < context.size; ++r) {
    if (global_ranks[r] == worldRank()) context.rank = r;
  }
  context.group_name = name;
  context.global_ranks = global_ranks;
  context.timeout = timeout;
  return context;
}

// Tensor memory with element access through double: every value the tests
// use is a small integer (or a quotient computed in the dtype's own
// precision), exactly representable in every dtype.
class Buffer {
 public:
  Buffer(DType dtype, int64_t numel)
      : dtype_(dtype), numel_(numel), bytes_(numel * dtypeSize(dtype)) {}

  Tensor tensor() { return Tensor(bytes_.data(), dtype_, {numel_}); }
  int64_t numel() const { return numel_; }

  void set(int64_t i, double value) {
    void* p = bytes_.data() + i * dtypeSize(dtype_);
    switch (dtype_) {
      case DType::kFloat32:
        store(p, static_cast<float>(value));
        return;
      case DType::kFloat64:
        store(p, value);
        return;
      case DType::kFloat16:
        store(p, comm::floatToHalf(static_cast<float>(value)));
        return;
      case DType::kBFloat16:
        store(p, comm::floatToBfloat16(static_cast<float>(value)));
        return;
      case DType::kInt8:
        store(p, static_cast<int8_t>(value));
        return;
      case DType::kUInt8:
        store(p, static_cast<uint8_t>(value));
        return;
      case DType::kInt32:
        store(p, static_cast<int32_t>(value));
        return;
      case DType::kInt64:
        store(p, static_cast<int64_t>(value));
        return;
      case DType::kBool:
        store(p, value != 0);
        return;
    }
  }

  double get(int64_t i) const {
    const void* p = bytes_.data() + i * dtypeSize(dtype_);
    switch (dtype_) {
      case DType::kFloat32:
        return load<float>(p);
      case DType::kFloat64:
        return load<double>(p);
      case DType::kFloat16:
        return comm::halfToFloat(load<uint16_t>(p));
      case DType::kBFloat16:
        return comm::bfloat16ToFloat(load<uint16_t>(p));
      case DType::kInt8:
        return load<int8_t>(p);
      case DType::kUInt8:
        return load<uint8_t>(p);
      case DType::kInt32:
        return load<int32_t>(p);
      case DType::kInt64:
        return static_cast<double>(load<int64_t>(p));
      case DType::kBool:
        return load<bool>(p) ? 1 : 0;
    }
    return 0;
  }

 private:
  template <typename T>
  static void store(void* p, T value) {
    std::memcpy(p, &value, sizeof(T));
  }
  template <typename T>
  static T load(const void* p) {
    T value;
    std::memcpy(&value, p, sizeof(T));
    return value;
  }

  DType dtype_;
  int64_t numel_;
  std::vector<uint8_t> bytes_;
};

bool isBitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

// Rank r's element i for a reduction with `op` on `dtype`: 1..3 for
// arithmetic (sums, products and averages stay exact in every dtype), 7-bit
// patterns for bitwise ops, a mix of true and false for bool.
double inputValue(ReduceOp op, DType dtype, int r, int64_t i) {
  if (dtype == DType::kBool) return (r + i) % (worldSize() + 1) != 0 ? 1 : 0;
  if (isBitwise(op)) return static_cast<double>((r * 37 + i * 11) % 128);
  return static_cast<double>(1 + (r + i) % 3);
}

// What reducing element i over `ranks` gives, in double before rounding to
// the dtype (the caller stores it into a Buffer of the dtype).
double expectedValue(ReduceOp op, DType dtype, const std::vector<int>& ranks, int64_t i) {
  std::vector<double> v;
  for (int r : ranks) v.push_back(inputValue(op, dtype, r, i));
  const int n = static_cast<int>(v.size());
  if (dtype == DType::kBool) {
    int trues = 0;
    for (double x : v) trues += x != 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor:
        return trues > 0;
      case ReduceOp::kBxor:
        return trues % 2;
      default:
        return trues == n;
    }
  }
  double result = v[0];
  int64_t bits = static_cast<int64_t>(v[0]);
  for (int k = 1; k < n; ++k) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        result += v[k];
        break;
      case ReduceOp::kProduct:
        result *= v[k];
        break;
      case ReduceOp::kMin:
        result = std::min(result, v[k]);
        break;
      case ReduceOp::kMax:
        result = std::max(result, v[k]);
        break;
      case ReduceOp::kBand:
        bits &= static_cast<int64_t>(v[k]);
        break;
      case ReduceOp::kBor:
        bits |= static_cast<int64_t>(v[k]);
        break;
      case ReduceOp::kBxor:
        bits ^= static_cast<int64_t>(v[k]);
        break;
    }
  }
  if (isBitwise(op)) return static_cast<double>(bits);
  if (op != ReduceOp::kAvg) return result;
  if (!isFloatingPoint(dtype)) return static_cast<double>(static_cast<int64_t>(result) / n);
  if (dtype == DType::kFloat64) return result / n;
  return static_cast<float>(result) / static_cast<float>(n);
}

std::string caseName(ReduceOp op, DType dtype) {
  return absl::StrCat(std::string(reduceOpName(op)), " on ", std::string(dtypeName(dtype)));
}

class MpiBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registerMpiBackend();
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        createBackend("mpi", Device::Type::kCpu, contextFor("default", allRanks()));
    ASSERT_TRUE(backend.ok()) << backend.status();
    world_ = std::move(*backend).release();
  }

  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(world_, nullptr);
    rank_ = world_->rank();
    size_ = world_->size();
  }

  // The next call's identity in the world group; every rank numbers alike.
  static CollectiveInfo info(const std::string& op, int peer = -1) {
    return info(*world_, op, peer);
  }
  static CollectiveInfo info(const Backend& backend, const std::string& op, int peer = -1) {
    static uint64_t seq = 0;
    return {.group = backend.groupName(),
            .rank = backend.rank(),
            .group_size = backend.size(),
            .seq = ++seq,
            .op = op,
            .peer = peer};
  }

  static absl::Status run(const Backend::WorkOr& work) {
    if (!work.ok()) return work.status();
    return (*work)->wait();
  }

  static inline Backend* world_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
};

TEST_F(MpiBackendTest, AllReduceComputesEveryOpOnEveryDtypeItSupports) {
  constexpr int64_t kNumel = 7;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      Buffer data(dtype, kNumel);
      for (int64_t i = 0; i < kNumel; ++i) data.set(i, inputValue(op, dtype, rank_, i));
      const Backend::WorkOr work =
          world_->allReduce(data.tensor(), {.op = op, .timeout = {}}, info("all_reduce"));
      if (!checkReduceOpSupports(op, dtype).ok()) {
        // Wrong dtype for the op: refused at once, on every rank alike.
        EXPECT_THAT(
            work.status(),
            StatusIs(absl::StatusCode::kInvalidArgument,
                     AllOf(HasSubstr("all_reduce #"), HasSubstr("backend mpi"),
                           HasSubstr(absl::StrCat("reduce op ", std::string(reduceOpName(op)))),
                           HasSubstr(std::string(dtypeName(dtype))))));
        continue;
      }
      ASSERT_TRUE(run(work).ok()) << caseName(op, dtype) << ": " << run(work);
      Buffer expected(dtype, kNumel);
      for (int64_t i = 0; i < kNumel; ++i) {
        expected.set(i, expectedValue(op, dtype, allRanks(), i));
        EXPECT_EQ(data.get(i), expected.get(i)) << caseName(op, dtype) << ", element " << i;
      }
    }
  }
}

TEST_F(MpiBackendTest, ReduceLeavesTheResultOnTheRootOnly) {
  constexpr int64_t kNumel = 5;
  const int root = size_ - 1;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64, DType::kBool}) {
    for (ReduceOp op : kAllReduceOps) {
      if (!checkReduceOpSupports(op, dtype).ok()) continue;
      Buffer data(dtype, kNumel);
      for (int64_t i = 0; i < kNumel; ++i) data.set(i, inputValue(op, dtype, rank_, i));
      ASSERT_TRUE(run(world_->reduce(data.tensor(), {.root = root, .op = op, .timeout = {}},
                                     info("reduce")))
                      .ok());
      Buffer expected(dtype, kNumel);
      for (int64_t i = 0; i < kNumel; ++i) {
        expected.set(i, rank_ == root ? expectedValue(op, dtype, allRanks(), i)
                                      : inputValue(op, dtype, rank_, i));
        EXPECT_EQ(data.get(i), expected.get(i)) << caseName(op, dtype) << ", element " << i;
      }
    }
  }
}

TEST_F(MpiBackendTest, BroadcastFromEveryRoot) {
  for (DType dtype : {DType::kFloat64, DType::kFloat16, DType::kUInt8}) {
    for (int root = 0; root < size_; ++root) {
      Buffer data(dtype, 6);
      for (int64_t i = 0; i < 6; ++i) data.set(i, rank_ * 10 + i);
      ASSERT_TRUE(
          run(world_->broadcast(data.tensor(), {.root = root, .timeout = {}}, info("broadcast")))
              .ok());
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(data.get(i), root * 10 + i) << "root " << root;
    }
  }
}

TEST_F(MpiBackendTest, AllGatherIntoListsAndIntoOneTensorInAndOutOfPlace) {
  std::vector<int32_t> input = {rank_, rank_ * 100};
  std::vector<std::vector<int32_t>> lists(size_, std::vector<int32_t>(2, -1));
  std::vector<Tensor> outputs;
  for (auto& list : lists) outputs.push_back(Tensor::of(list));
  ASSERT_TRUE(run(world_->allGather(outputs, Tensor::of(input), {}, info("all_gather"))).ok());
  for (int r = 0; r < size_; ++r) EXPECT_EQ(lists[r], (std::vector<int32_t>{r, r * 100}));

  std::vector<int32_t> flat(2 * size_, -1);
  ASSERT_TRUE(run(world_->allGatherIntoTensor(Tensor::of(flat), Tensor::of(input), {},
                                              info("all_gather_into_tensor")))
                  .ok());
  for (int r = 0; r < size_; ++r) {
    EXPECT_EQ(flat[2 * r], r);
    EXPECT_EQ(flat[2 * r + 1], r * 100);
  }

  // In place: the input is this rank's slot of the output.
  std::vector<int32_t> in_place(2 * size_, -1);
  in_place[2 * rank_] = rank_ + 7;
  in_place[2 * rank_ + 1] = rank_ + 8;
  Tensor whole = Tensor::of(in_place);
  ASSERT_TRUE(run(world_->allGatherIntoTensor(whole, *whole.narrow(2 * rank_, 2), {},
                                              info("all_gather_into_tensor")))
                  .ok());
  for (int r = 0; r < size_; ++r) {
    EXPECT_EQ(in_place[2 * r], r + 7);
    EXPECT_EQ(in_place[2 * r + 1], r + 8);
  }
}

TEST_F(MpiBackendTest, GatherAndScatterThroughANonZeroRoot) {
  const int root = 1 % size_;
  std::vector<double> input = {rank_ + 0.5, rank_ + 0.25, rank_ + 0.125};
  std::vector<std::vector<double>> gathered;
  std::vector<Tensor> outputs;
  if (rank_ == root) {
    gathered.assign(size_, std::vector<double>(3, -1));
    for (auto& g : gathered) outputs.push_back(Tensor::of(g));
  }
  ASSERT_TRUE(
      run(world_->gather(outputs, Tensor::of(input), {.root = root, .timeout = {}}, info("gather")))
          .ok());
  for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
    EXPECT_EQ(gathered[r], (std::vector<double>{r + 0.5, r + 0.25, r + 0.125}));
  }

  std::vector<std::vector<double>> pieces;
  std::vector<Tensor> inputs;
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r) pieces.push_back({r * 2.0, r * 3.0});
    for (auto& p : pieces) inputs.push_back(Tensor::of(p));
  }
  std::vector<double> output(2, -1);
  ASSERT_TRUE(run(world_->scatter(Tensor::of(output), inputs, {.root = root, .timeout = {}},
                                  info("scatter")))
                  .ok());
  EXPECT_EQ(output, (std::vector<double>{rank_ * 2.0, rank_ * 3.0}));
}

TEST_F(MpiBackendTest, ReduceScatterListAndTensorWithEveryOp) {
  constexpr int64_t kChunk = 3;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    for (ReduceOp op : kAllReduceOps) {
      if (!checkReduceOpSupports(op, dtype).ok()) continue;
      // Element i of the whole input is reduced across ranks; rank r keeps
      // chunk r.
      Buffer whole(dtype, kChunk * size_);
      for (int64_t i = 0; i < whole.numel(); ++i) whole.set(i, inputValue(op, dtype, rank_, i));
      std::vector<Buffer> chunks;
      std::vector<Tensor> inputs;
      for (int r = 0; r < size_; ++r) {
        chunks.emplace_back(dtype, kChunk);
        for (int64_t j = 0; j < kChunk; ++j) chunks[r].set(j, whole.get(r * kChunk + j));
      }
      for (Buffer& c : chunks) inputs.push_back(c.tensor());
      Buffer from_list(dtype, kChunk), from_tensor(dtype, kChunk);
      ASSERT_TRUE(run(world_->reduceScatter(from_list.tensor(), inputs, {.op = op, .timeout = {}},
                                            info("reduce_scatter")))
                      .ok());
      ASSERT_TRUE(
          run(world_->reduceScatterTensor(from_tensor.tensor(), whole.tensor(),
                                          {.op = op, .timeout = {}}, info("reduce_scatter_tensor")))
              .ok());
      Buffer expected(dtype, kChunk);
      for (int64_t j = 0; j < kChunk; ++j) {
        expected.set(j, expectedValue(op, dtype, allRanks(), rank_ * kChunk + j));
        EXPECT_EQ(from_list.get(j), expected.get(j)) << caseName(op, dtype) << ", element " << j;
        EXPECT_EQ(from_tensor.get(j), expected.get(j)) << caseName(op, dtype) << ", element " << j;
      }
    }
  }
}

TEST_F(MpiBackendTest, ReduceScatterTensorInPlace) {
  std::vector<float> whole(2 * size_);
  for (int64_t i = 0; i < static_cast<int64_t>(whole.size()); ++i) whole[i] = rank_ + i;
  Tensor input = Tensor::of(whole);
  ASSERT_TRUE(run(world_->reduceScatterTensor(*input.narrow(2 * rank_, 2), input, {},
                                              info("reduce_scatter_tensor")))
                  .ok());
  const float rank_sum = size_ * (size_ - 1) / 2.0f;
  EXPECT_EQ(whole[2 * rank_], rank_sum + size_ * (2 * rank_));
  EXPECT_EQ(whole[2 * rank_ + 1], rank_sum + size_ * (2 * rank_ + 1));
}

TEST_F(MpiBackendTest, AllToAllListWithUnevenSizes) {
  // Rank r sends d + r + 1 copies of 100 * r + d to rank d.
  std::vector<std::vector<int64_t>> sends, receives;
  std::vector<Tensor> inputs, outputs;
  for (int d = 0; d < size_; ++d) sends.emplace_back(d + rank_ + 1, 100 * rank_ + d);
  for (int s = 0; s < size_; ++s) receives.emplace_back(rank_ + s + 1, -1);
  for (auto& v : sends) inputs.push_back(Tensor::of(v));
  for (auto& v : receives) outputs.push_back(Tensor::of(v));
  ASSERT_TRUE(run(world_->allToAll(outputs, inputs, {}, info("all_to_all"))).ok());
  for (int s = 0; s < size_; ++s) {
    EXPECT_EQ(receives[s], std::vector<int64_t>(rank_ + s + 1, 100 * s + rank_)) << "from " << s;
  }
}

TEST_F(MpiBackendTest, AllToAllSingleWithUnevenSplits) {
  // Rows of 2 elements; rank r sends (r + d) % 3 rows to rank d, each row
  // holding (r, d).
  std::vector<int64_t> input_splits, output_splits;
  std::vector<int32_t> input;
  for (int d = 0; d < size_; ++d) {
    input_splits.push_back((rank_ + d) % 3);
    for (int row = 0; row < (rank_ + d) % 3; ++row) {
      input.push_back(rank_);
      input.push_back(d);
    }
  }
  int64_t output_rows = 0;
  for (int s = 0; s < size_; ++s) {
    output_splits.push_back((s + rank_) % 3);
    output_rows += (s + rank_) % 3;
  }
  std::vector<int32_t> output(2 * output_rows, -1);
  const int64_t input_rows = static_cast<int64_t>(input.size()) / 2;
  Tensor in(input.data(), DType::kInt32, {input_rows, 2});
  Tensor out(output.data(), DType::kInt32, {output_rows, 2});
  ASSERT_TRUE(run(world_->allToAllSingle(out, in, output_splits, input_splits, {},
                                         info("all_to_all_single")))
                  .ok());
  std::vector<int32_t> expected;
  for (int s = 0; s < size_; ++s) {
    for (int row = 0; row < (s + rank_) % 3; ++row) {
      expected.push_back(s);
      expected.push_back(rank_);
    }
  }
  EXPECT_EQ(output, expected);
}

// Every collective the runtime uses, at blocks of 256 KiB and 1 MiB,
// ten calls back to back, every element checked (the check that found
// Gloo's halving-doubling reduce-scatter wrong; comm/testing).
TEST_F(MpiBackendTest, LargeCollectivesAreExactOnEveryCall) {
  constexpr int kCalls = 10;
  for (int64_t chunk : {int64_t{64} << 10, int64_t{256} << 10}) {
    for (const comm::testing::ExactCase& c : comm::testing::exactCases()) {
      const uint64_t first_seq = info(c.op).seq;
      for (int call = 1; call < kCalls; ++call) (void)info(c.op);
      comm::testing::expectExactCalls(c, *world_, chunk, kCalls, first_seq);
    }
  }
  // The ranks finish their checks at different times; line them up again
  // for the tests that follow.
  ASSERT_TRUE(run(world_->barrier({}, info("barrier"))).ok());
}

TEST_F(MpiBackendTest, BarrierWaitsForTheLastRank) {
  constexpr absl::Duration kLate = absl::Milliseconds(400);
  // Line the ranks up first: the test before this one may end hundreds of
  // milliseconds apart on different ranks.
  ASSERT_TRUE(run(world_->barrier({}, info("barrier"))).ok());
  if (rank_ == 0) absl::SleepFor(kLate);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(run(world_->barrier({}, info("barrier"))).ok());
  if (rank_ != 0) {
    EXPECT_GE(absl::Now() - start, kLate / 2);
  }
}

TEST_F(MpiBackendTest, SendsAndReceivesOfARingRunSideBySideAndMatchByTag) {
  // Larger than any eager limit: each send completes only once its receive
  // runs, so the ring deadlocks unless sends and receives overlap.
  constexpr int kCount = 1 << 20;
  const int next = (rank_ + 1) % size_;
  const int prev = (rank_ + size_ - 1) % size_;
  std::vector<float> out_a(kCount, rank_ + 1.0f), out_b(kCount, rank_ + 2.0f);
  std::vector<float> in_a(kCount, -1), in_b(kCount, -1);
  // Sent with tags 1 then 2, received with tags 2 then 1.
  const Backend::WorkOr sends[] = {
      world_->send(Tensor::of(out_a), next, {.tag = 1, .timeout = {}}, info("send", next)),
      world_->send(Tensor::of(out_b), next, {.tag = 2, .timeout = {}}, info("send", next))};
  const Backend::WorkOr recvs[] = {
      world_->recv(Tensor::of(in_b), prev, {.tag = 2, .timeout = {}}, info("recv", prev)),
      world_->recv(Tensor::of(in_a), prev, {.tag = 1, .timeout = {}}, info("recv", prev))};
  for (const auto& work : sends) ASSERT_TRUE(run(work).ok()) << run(work);
  for (const auto& work : recvs) ASSERT_TRUE(run(work).ok()) << run(work);
  EXPECT_EQ(in_a, std::vector<float>(kCount, prev + 1.0f));
  EXPECT_EQ(in_b, std::vector<float>(kCount, prev + 2.0f));
}

TEST_F(MpiBackendTest, ArgumentsOnlyMpiRejectsFailAtOnce) {
  std::vector<float> values(4);
  const int next = (rank_ + 1) % size_;
  EXPECT_THAT(world_->send(Tensor::of(values), next, {.tag = -1, .timeout = {}}, info("send", next))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("send #"), HasSubstr("tag -1 is outside MPI's range"))));
  // More elements than an MPI count holds; never touched, so no memory.
  Tensor huge(values.data(), DType::kUInt8, {int64_t{1} << 31});
  EXPECT_THAT(world_->broadcast(huge, {}, info("broadcast")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("broadcast #"), HasSubstr("2147483648 elements"))));
}

TEST_F(MpiBackendTest, SubgroupsOfEvenAndOddRanksRunSideBySide) {
  std::vector<int> evens, odds;
  for (int r = 0; r < size_; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  const std::vector<int>& mine = rank_ % 2 == 0 ? evens : odds;
  absl::StatusOr<std::unique_ptr<Backend>> group =
      createMpiBackend(contextFor(rank_ % 2 == 0 ? "evens" : "odds", mine));
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ((*group)->size(), static_cast<int>(mine.size()));
  std::vector<int64_t> value = {rank_};
  ASSERT_TRUE(run((*group)->allReduce(Tensor::of(value), {}, info(**group, "all_reduce"))).ok());
  int64_t sum = 0;
  for (int r : mine) sum += r;
  EXPECT_EQ(value[0], sum);
}

TEST_F(MpiBackendTest, GroupRanksFollowGlobalRanksOrder) {
  std::vector<int> reversed;
  for (int r = size_ - 1; r >= 0; --r) reversed.push_back(r);
  absl::StatusOr<std::unique_ptr<Backend>> group =
      createMpiBackend(contextFor("reversed", reversed));
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->rank(), size_ - 1 - rank_);
  std::vector<int32_t> mine = {rank_};
  std::vector<int32_t> all(size_, -1);
  ASSERT_TRUE(run((*group)->allGatherIntoTensor(Tensor::of(all), Tensor::of(mine), {},
                                                info(**group, "all_gather_into_tensor")))
                  .ok());
  EXPECT_EQ(all, reversed);
}

TEST_F(MpiBackendTest, RanksThatAreNotMpisAreRefused) {
  BackendContext shifted = contextFor("shifted", allRanks());
  shifted.rank = (rank_ + 1) % size_;
  EXPECT_THAT(createMpiBackend(shifted).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("group shifted"), HasSubstr("launched with mpirun"),
                             HasSubstr(absl::StrCat("MPI says it is world rank ", rank_)))));
  std::vector<int> too_many = allRanks();
  too_many.push_back(size_);
  BackendContext outside = contextFor("outside", too_many);
  EXPECT_THAT(createMpiBackend(outside).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(absl::StrCat("global rank ", size_,
                                                    " is outside the MPI world of ", size_)),
                             HasSubstr("mpirun -np"))));
}

TEST_F(MpiBackendTest, AMemberThatNeverArrivesIsNamed) {
  // Only world rank 0 creates group {0, 1}'s backend.
  if (rank_ == 0) {
    const absl::Time start = absl::Now();
    EXPECT_THAT(createMpiBackend(contextFor("half-started", {0, 1}, absl::Seconds(1))).status(),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr("group half-started"),
                               HasSubstr("group ranks 1 (world rank 1) did not create"))));
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  ASSERT_TRUE(run(world_->barrier({}, info("barrier"))).ok());
}

TEST_F(MpiBackendTest, ACollectiveThatTimesOutNamesItselfAndBreaksTheBackend) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      createMpiBackend(contextFor("late", allRanks()));
  ASSERT_TRUE(backend.ok()) << backend.status();
  // Static: rank 0 abandons its call, and MPI may still write the result
  // into this memory after the test ends (as docs/comm_backends.md warns).
  static std::vector<int64_t> value;
  value = {rank_ + 1};
  const Tensor tensor = Tensor::of(value);
  const CollectiveInfo late = info(**backend, "all_reduce");
  const CollectiveInfo after = info(**backend, "barrier");
  if (rank_ == 0) {
    // Rank 0 arrives alone and gives up after its timeout.
    const absl::Time start = absl::Now();
    const Backend::WorkOr work = (*backend)->allReduce(
        tensor, {.op = ReduceOp::kSum, .timeout = absl::Milliseconds(500)}, late);
    ASSERT_TRUE(work.ok());
    EXPECT_THAT((*work)->wait(absl::Seconds(10)),
                StatusIs(absl::StatusCode::kDeadlineExceeded,
                         AllOf(HasSubstr(late.describe()), HasSubstr("did not complete within"),
                               HasSubstr("backend is now broken"))));
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));
    // Later calls fail at once and say why.
    EXPECT_THAT((*backend)->barrier({}, after).status(),
                StatusIs(absl::StatusCode::kInternal,
                         AllOf(HasSubstr(after.describe()), HasSubstr("is broken because"),
                               HasSubstr(absl::StrCat(late.describe(), " timed out")))));
  } else {
    // The others join the same call late; rank 0's half is still posted in
    // MPI, so the call completes for them, with every rank's value.
    absl::SleepFor(absl::Milliseconds(1500));
    ASSERT_TRUE(run((*backend)->allReduce(tensor, {}, late)).ok());
    EXPECT_EQ(value[0], size_ * (size_ + 1) / 2);
  }
  ASSERT_TRUE(run(world_->barrier({}, info("barrier"))).ok());
}

TEST_F(MpiBackendTest, CudaTensorsAreStagedOrPassedToACudaAwareMpi) {
  const std::string reason = nccl::cudaUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  // Every rank sees the same machine, so all of them skip or none does.
  const absl::StatusOr<bool> cuda_aware = mpiIsCudaAware();
  ASSERT_TRUE(cuda_aware.ok()) << cuda_aware.status();
  RecordProperty("mpi_path_for_cuda_tensors", *cuda_aware ? "cuda-aware" : "host staging");
  int device_count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&device_count), cudaSuccess);
  const int device = rank_ % device_count;
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  constexpr int kCount = 1024;
  std::vector<float> host(kCount, rank_ + 1.0f);
  void* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, kCount * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(data, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  Tensor tensor(data, DType::kFloat32, {kCount}, Device::cuda(device));
  ASSERT_TRUE(
      run(world_->allReduce(tensor, {.op = ReduceOp::kAvg, .timeout = {}}, info("all_reduce")))
          .ok());
  ASSERT_EQ(cudaMemcpy(host.data(), data, kCount * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(host, std::vector<float>(kCount, (size_ + 1) / 2.0f));
  cudaFree(data);
}

}  // namespace
}  // namespace loom::comm::mpi
