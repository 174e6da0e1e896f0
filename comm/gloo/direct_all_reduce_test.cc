// Tests of the two-round all-reduce: the ring's chunks computed by hand,
// the order of addition on values where order shows, and, with ranks as
// threads over real Gloo contexts, results equal bit for bit to
// gloo::allreduce's ring on random inputs for 2 to 5 ranks, sizes that
// leave chunks short or empty, and sizes with more than two segments per
// rank.
#include "comm/gloo/direct_all_reduce.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_reduce.h"
#include "comm/gloo/gloo_store.h"
#include "comm/hash_store.h"
#include "comm/prefix_store.h"
#include "gloo/allreduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::comm::gloo {
namespace {

std::vector<std::pair<size_t, size_t>> asPairs(const std::vector<ByteRange>& chunks) {
  std::vector<std::pair<size_t, size_t>> pairs;
  for (const ByteRange& c : chunks) pairs.emplace_back(c.begin, c.end);
  return pairs;
}

using Pairs = std::vector<std::pair<size_t, size_t>>;

TEST(RingChunksTest, TwoSegmentsPerRankWhileTheBufferIsSmall) {
  // 4 KiB of f32 on 4 ranks: 8 segments of 512 bytes, 2 per rank.
  EXPECT_EQ(asPairs(ringChunks(4096, 4, 4)),
            (Pairs{{0, 1024}, {1024, 2048}, {2048, 3072}, {3072, 4096}}));
  // 1001 f32 on 3 ranks: 6 segments of 668 bytes (667.3 rounded up to
  // whole elements); the last chunk is short.
  EXPECT_EQ(asPairs(ringChunks(4004, 4, 3)), (Pairs{{0, 1336}, {1336, 2672}, {2672, 4004}}));
}

TEST(RingChunksTest, TrailingChunksMayBeEmpty) {
  // 3 f32 on 4 ranks: segments of one element, so ranks 2 and 3 get none.
  EXPECT_EQ(asPairs(ringChunks(12, 4, 4)), (Pairs{{0, 8}, {8, 12}, {12, 12}, {12, 12}}));
  EXPECT_EQ(asPairs(ringChunks(8, 8, 2)), (Pairs{{0, 8}, {8, 8}}));
}

TEST(RingChunksTest, LargeBuffersHaveMoreSegmentsOfAtMostTheBound) {
  // 10 MiB + 4 bytes of f32 on 4 ranks: 11 segments of the 1 MiB bound,
  // rounded up to 12, each of ceil(size / 12) rounded to whole elements.
  const size_t total = 10 * 1024 * 1024 + 4;
  const size_t segment = 873816;  // ceil(10485764 / 12) = 873814, rounded up to 4
  EXPECT_EQ(asPairs(ringChunks(total, 4, 4)), (Pairs{{0, 3 * segment},
                                                     {3 * segment, 6 * segment},
                                                     {6 * segment, 9 * segment},
                                                     {9 * segment, total}}));
  // A bound below one element still gives one element per segment.
  EXPECT_EQ(asPairs(ringChunks(64, 8, 2, 3)), (Pairs{{0, 32}, {32, 64}}));
}

// Subtraction shows the order: a - (b - c) != (a - b) - c.
void subtract(void* out, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<double*>(out)[i] =
        static_cast<const double*>(a)[i] - static_cast<const double*>(b)[i];
  }
}

TEST(ReduceInRingOrderTest, OwnValuesFirstFromTheFarEndOfTheRing) {
  std::vector<double> x0 = {100}, x1 = {10}, x2 = {3}, x3 = {1};
  reduceInRingOrder(&subtract,
                    {reinterpret_cast<uint8_t*>(x0.data()), reinterpret_cast<uint8_t*>(x1.data()),
                     reinterpret_cast<uint8_t*>(x2.data()), reinterpret_cast<uint8_t*>(x3.data())},
                    1);
  EXPECT_EQ(x0[0], 100 - (10 - (3 - 1)));
  std::vector<double> y0 = {5}, y1 = {7};
  reduceInRingOrder(
      &subtract, {reinterpret_cast<uint8_t*>(y0.data()), reinterpret_cast<uint8_t*>(y1.data())}, 1);
  EXPECT_EQ(y0[0], 5 - 7);
}

TEST(DirectAllReduceScratchTest, OneCopyOfTheOwnChunkPerRank) {
  EXPECT_EQ(directAllReduceScratchBytes(4096, 4, 1, 4), 4 * 1024);
  EXPECT_EQ(directAllReduceScratchBytes(12, 4, 3, 4), 0);
}

// `size` Gloo contexts connected over one in-memory store, one per thread.
std::vector<std::shared_ptr<::gloo::rendezvous::Context>> connect(int size,
                                                                  const std::string& name) {
  auto store = std::make_shared<PrefixStore>(name, std::make_shared<HashStore>(absl::Seconds(30)));
  std::vector<std::shared_ptr<::gloo::rendezvous::Context>> contexts(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ::gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto context = std::make_shared<::gloo::rendezvous::Context>(r, size);
      context->setTimeout(std::chrono::seconds(30));
      GlooStore gloo_store(store, absl::Seconds(30));
      std::shared_ptr<::gloo::transport::Device> device =
          ::gloo::transport::tcp::CreateDevice(attr);
      context->connectFullMesh(gloo_store, device);
      contexts[r] = context;
    });
  }
  for (std::thread& t : threads) t.join();
  return contexts;
}

// Rank r's random input of `count` values of T: normals (so sums round
// differently in different orders), with a NaN and signed zeros where
// min/max tell operands apart.
template <typename T>
std::vector<T> randomInput(int rank, size_t count) {
  std::mt19937 gen(1234 + rank);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<T, ::gloo::float16>) {
      values[i] = ::gloo::cpu_float2half_rn(static_cast<float>(normal(gen)));
    } else {
      values[i] = static_cast<T>(normal(gen) * (std::is_integral_v<T> ? 1000 : 1));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (count > 3) {
      values[1] = rank == 1 ? std::numeric_limits<T>::quiet_NaN() : values[1];
      values[2] = rank % 2 == 0 ? T(0.0) : T(-0.0);
    }
  }
  return values;
}

// Runs gloo::allreduce and directAllReduce on the same inputs and returns
// whether every rank's two results are the same bytes.
template <typename T>
void expectSameAsGlooRing(const std::vector<std::shared_ptr<::gloo::rendezvous::Context>>& contexts,
                          size_t count, ReduceOp op, DType dtype) {
  const int n = static_cast<int>(contexts.size());
  const ReduceFn fn = *reduceFunction(op, dtype);
  std::vector<std::vector<T>> ring(n), direct(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    ring[r] = direct[r] = randomInput<T>(r, count);
    threads.emplace_back([&, r] {
      ::gloo::AllreduceOptions opts(contexts[r]);
      opts.setOutput(ring[r].data(), count);
      opts.setReduceFunction(fn);
      opts.setTag(1);
      ::gloo::allreduce(opts);
      std::vector<uint8_t> scratch(directAllReduceScratchBytes(count * sizeof(T), sizeof(T), r, n));
      const absl::Status status =
          directAllReduce(*contexts[r], direct[r].data(), count * sizeof(T), sizeof(T), fn, 2,
                          std::chrono::seconds(30), scratch.data());
      EXPECT_TRUE(status.ok()) << status;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(std::memcmp(ring[r].data(), direct[r].data(), count * sizeof(T)), 0)
        << n << " ranks, " << count << " elements of " << dtypeName(dtype) << ", op "
        << reduceOpName(op) << ": rank " << r << " differs from gloo::allreduce";
  }
}

TEST(DirectAllReduceTest, EqualsGlooRingBitForBit) {
  for (int n = 2; n <= 5; ++n) {
    const auto contexts = connect(n, absl::StrCat("ranks", n));
    for (size_t count : {1, 2, 3, 7, 37, 1001, 1024, 4099, 65536 + 3}) {
      expectSameAsGlooRing<float>(contexts, count, ReduceOp::kSum, DType::kFloat32);
      expectSameAsGlooRing<float>(contexts, count, ReduceOp::kMin, DType::kFloat32);
      expectSameAsGlooRing<double>(contexts, count, ReduceOp::kMax, DType::kFloat64);
      expectSameAsGlooRing<double>(contexts, count, ReduceOp::kProduct, DType::kFloat64);
      expectSameAsGlooRing<::gloo::float16>(contexts, count, ReduceOp::kSum, DType::kFloat16);
      expectSameAsGlooRing<int32_t>(contexts, count, ReduceOp::kSum, DType::kInt32);
    }
  }
}

TEST(DirectAllReduceTest, EqualsGlooRingWithManySegmentsPerRank) {
  // Over 2 * ranks * 1 MiB, the ring cuts each chunk into more than two
  // segments and their size no longer divides the buffer evenly.
  const auto contexts = connect(4, "large");
  expectSameAsGlooRing<float>(contexts, (10 * 1024 * 1024 + 4) / 4, ReduceOp::kSum,
                              DType::kFloat32);
  expectSameAsGlooRing<double>(contexts, 2 * 1024 * 1024 + 5, ReduceOp::kSum, DType::kFloat64);
}

}  // namespace
}  // namespace loom::comm::gloo
