// The host KernelSet's bf16 contract: bf16 operands are read as their exact
// f32 values, the f32 kernel runs, bf16 results are rounded once; sums of
// chunks are added in f32 in chunk order; AdamW with a master copy updates
// the master as the f32 step and rounds it into the bf16 params.
#include <cstdint>
#include <vector>

#include "comm/half_float.h"
#include "gtest/gtest.h"
#include "runtime/executor/kernel_set.h"
#include "runtime/optim/adamw.h"

namespace loom::runtime {
namespace {

using comm::DType;

std::vector<uint16_t> toBf16(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = comm::floatToBfloat16(values[i]);
  return bits;
}

std::vector<float> widen(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) values[i] = comm::bfloat16ToFloat(bits[i]);
  return values;
}

float roundTrip(float value) { return comm::bfloat16ToFloat(comm::floatToBfloat16(value)); }

Ref f32(std::vector<float>& v) { return {v.data(), DType::kFloat32}; }
Ref bf16(std::vector<uint16_t>& v) { return {v.data(), DType::kBFloat16}; }

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 37) % 23) + offset;
  return v;
}

TEST(CpuKernelSetTest, Bf16LinearIsTheF32LinearOfTheWidenedOperandsRounded) {
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  const int64_t rows = 3, in = 5, out = 4;
  std::vector<uint16_t> x = toBf16(ramp(rows * in, 0.013f, -0.1f)),
                        w = toBf16(ramp(in * out, 0.07f, -0.7f));
  std::vector<uint16_t> bias = toBf16(ramp(out, 0.3f, 0.01f)), y(rows * out);
  ASSERT_TRUE(k->linear(bf16(x), bf16(w), bf16(bias), bf16(y), rows, in, out).ok());
  std::vector<float> xf = widen(x), wf = widen(w), bf = widen(bias), want(rows * out);
  ASSERT_TRUE(k->linear(f32(xf), f32(wf), f32(bf), f32(want), rows, in, out).ok());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(comm::bfloat16ToFloat(y[i]), roundTrip(want[i])) << i;
}

TEST(CpuKernelSetTest, MixedOperandTypesAreEachReadAsTheirValues) {
  // A bf16 activation and an f32 gamma into an f32 result: no rounding.
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  std::vector<uint16_t> x = toBf16(ramp(8, 0.11f, -1.0f));
  std::vector<float> gamma = ramp(4, 0.2f, 0.5f), y(8), xf = widen(x), want(8);
  ASSERT_TRUE(k->rmsNorm(bf16(x), f32(gamma), f32(y), 2, 4, 1e-5f).ok());
  ASSERT_TRUE(k->rmsNorm(f32(xf), f32(gamma), f32(want), 2, 4, 1e-5f).ok());
  EXPECT_EQ(y, want);
}

TEST(CpuKernelSetTest, ConvertRoundsToNearestEven) {
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  // 257 lies halfway between 256 and 258 (bf16 spacing 2 there): ties go to
  // the even mantissa, 256; 259 goes up to 260.
  std::vector<float> values = {257.0f, 259.0f, -1.5f, 1e-3f}, back(4);
  std::vector<uint16_t> bits(4);
  ASSERT_TRUE(k->convert(f32(values), bf16(bits), 4).ok());
  ASSERT_TRUE(k->convert(bf16(bits), f32(back), 4).ok());
  EXPECT_EQ(back[0], 256.0f);
  EXPECT_EQ(back[1], 260.0f);
  EXPECT_EQ(back[2], -1.5f);
  EXPECT_EQ(back[3], roundTrip(1e-3f));
}

TEST(CpuKernelSetTest, SumChunksAddsInF32InChunkOrderAndRoundsOnce) {
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  // Four chunks of 1.0, 2^-9, 2^-9, 2^-9 per element: bf16 steps of 2^-7
  // near 1 would lose every 2^-9 if each partial sum were rounded; in f32 they
  // add to 1 + 3 * 2^-9, which rounds once to 1 + 2^-7.
  const float tiny = 1.0f / 512;
  std::vector<uint16_t> chunks = toBf16({1.0f, 2.0f, tiny, tiny, tiny, tiny, tiny, tiny});
  std::vector<uint16_t> sum(2);
  ASSERT_TRUE(k->sumChunks(bf16(chunks), 4, 2, /*average=*/false, bf16(sum)).ok());
  EXPECT_EQ(comm::bfloat16ToFloat(sum[0]), 1.0f + 1.0f / 128);
  std::vector<float> average(2);
  ASSERT_TRUE(k->sumChunks(bf16(chunks), 4, 2, /*average=*/true, f32(average)).ok());
  EXPECT_EQ(average[1], (2.0f + 3 * tiny) / 4);
}

TEST(CpuKernelSetTest, AdamWWithAMasterCopyUpdatesTheMasterAndRoundsIntoTheParams) {
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  const int64_t n = 16;
  optim::AdamWConfig config;
  config.lr = 0.01;
  std::vector<float> master = ramp(n, 0.01f, -0.05f), wantMaster = master;
  std::vector<uint16_t> params = toBf16(master), grads = toBf16(ramp(n, 0.3f, -2.0f));
  const std::vector<uint16_t> gradsBefore = grads;
  std::vector<float> m(n, 0.0f), v(n, 0.0f), wantM(n, 0.0f), wantV(n, 0.0f);
  const float half = 0.5f;
  ASSERT_TRUE(
      k->adamw(config, 1, bf16(params), bf16(grads), m.data(), v.data(), master.data(), n, &half)
          .ok());
  std::vector<float> scaled = widen(grads);
  optim::scaleGradients(scaled.data(), n, half);
  optim::adamwStep(config, 1, wantMaster.data(), scaled.data(), wantM.data(), wantV.data(), n);
  EXPECT_EQ(master, wantMaster);
  EXPECT_EQ(m, wantM);
  EXPECT_EQ(v, wantV);
  EXPECT_EQ(params, toBf16(wantMaster));
  EXPECT_EQ(grads, gradsBefore) << "clipping scales a copy";
}

TEST(CpuKernelSetTest, AdamWRefusesBf16ParamsWithoutAMasterCopy) {
  std::unique_ptr<KernelSet> k = cpuKernelSet();
  std::vector<uint16_t> params(4), grads(4);
  std::vector<float> m(4), v(4);
  absl::Status s =
      k->adamw({}, 1, bf16(params), bf16(grads), m.data(), v.data(), nullptr, 4, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("master copy"), std::string::npos) << s;
}

}  // namespace
}  // namespace loom::runtime
