// HostAdamW against one adamwStep call: the same bits for every thread
// count, chunk boundary, gradient type and clip scale.
#include "runtime/optim/host_adamw.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "comm/half_float.h"
#include "gtest/gtest.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime::optim {
namespace {

// Three chunks and a ragged end, so every thread gets a share and the last
// chunk is short.
constexpr int64_t kCount = 3 * HostAdamW::kChunk + 17;

struct State {
  std::vector<float> params, grads, exp_avg, exp_avg_sq;
};

State randomState(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State s;
  for (std::vector<float>* v : {&s.params, &s.grads, &s.exp_avg, &s.exp_avg_sq}) {
    v->resize(kCount);
    for (float& x : *v) x = normal(rng);
  }
  for (float& x : s.exp_avg_sq) x = x * x;
  return s;
}

void expectBitEqual(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

void expectSameState(const State& a, const State& b) {
  expectBitEqual(a.params, b.params, "params");
  expectBitEqual(a.exp_avg, b.exp_avg, "exp_avg");
  expectBitEqual(a.exp_avg_sq, b.exp_avg_sq, "exp_avg_sq");
}

const AdamWConfig kConfig{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};

TEST(HostAdamWTest, EveryThreadCountGivesTheOneCallBits) {
  State reference = randomState(1);
  for (int64_t step = 1; step <= 3; ++step) {
    adamwStep(kConfig, step, reference.params.data(), reference.grads.data(),
              reference.exp_avg.data(), reference.exp_avg_sq.data(), kCount);
  }
  for (int threads : {1, 2, 3, 7}) {
    State s = randomState(1);
    HostAdamW host(threads);
    EXPECT_EQ(host.threads(), threads);
    for (int64_t step = 1; step <= 3; ++step) {
      host.step(kConfig, step, s.params.data(), {s.grads.data(), false}, s.exp_avg.data(),
                s.exp_avg_sq.data(), kCount);
    }
    SCOPED_TRACE(threads);
    expectSameState(s, reference);
  }
}

TEST(HostAdamWTest, Bf16GradientsAreReadAsTheirF32Values) {
  State s = randomState(2);
  std::vector<uint16_t> bits(kCount);
  for (int64_t i = 0; i < kCount; ++i) bits[i] = comm::floatToBfloat16(s.grads[i]);
  State reference = s;
  for (int64_t i = 0; i < kCount; ++i) reference.grads[i] = comm::bfloat16ToFloat(bits[i]);
  adamwStep(kConfig, 4, reference.params.data(), reference.grads.data(), reference.exp_avg.data(),
            reference.exp_avg_sq.data(), kCount);
  HostAdamW host(3);
  host.step(kConfig, 4, s.params.data(), {bits.data(), true}, s.exp_avg.data(),
            s.exp_avg_sq.data(), kCount);
  expectSameState(s, reference);
}

TEST(HostAdamWTest, ClipScaleMultipliesACopyOfTheGradients) {
  State s = randomState(3);
  State reference = s;
  scaleGradients(reference.grads.data(), kCount, 0.25f);
  adamwStep(kConfig, 1, reference.params.data(), reference.grads.data(), reference.exp_avg.data(),
            reference.exp_avg_sq.data(), kCount);
  const std::vector<float> grads = s.grads;
  HostAdamW host(2);
  host.step(kConfig, 1, s.params.data(), {s.grads.data(), false}, s.exp_avg.data(),
            s.exp_avg_sq.data(), kCount, 0.25f);
  expectSameState(s, reference);
  expectBitEqual(s.grads, grads, "grads are left as they were");
  // A scale of 1 (no clipping) leaves the gradients as they are.
  State unscaled = randomState(3), plain = randomState(3);
  host.step(kConfig, 1, unscaled.params.data(), {unscaled.grads.data(), false},
            unscaled.exp_avg.data(), unscaled.exp_avg_sq.data(), kCount, 1.0f);
  adamwStep(kConfig, 1, plain.params.data(), plain.grads.data(), plain.exp_avg.data(),
            plain.exp_avg_sq.data(), kCount);
  expectSameState(unscaled, plain);
}

TEST(HostAdamWTest, ToBfloat16RoundsEveryElementToNearestEven) {
  const State s = randomState(4);
  std::vector<uint16_t> out(kCount, 0);
  HostAdamW host(3);
  host.toBfloat16(s.params.data(), out.data(), kCount);
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(out[i], comm::floatToBfloat16(s.params[i])) << i;
  }
}

}  // namespace
}  // namespace loom::runtime::optim
