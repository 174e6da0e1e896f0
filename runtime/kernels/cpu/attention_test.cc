// Tests of the blocked attention kernels (attention.cc) against the scalar
// kernels they replaced (attention_reference.h), on shapes whose sequence is
// and is not a multiple of the tile, MHA and GQA, and of the determinism the
// executor relies on: the same bits run to run, and the same bits whether a
// call holds every head and sequence or only some of them, as a tensor or
// data parallel rank does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/attention_reference.h"
#include "runtime/kernels/cpu/cpu_kernels.h"

namespace loom::runtime::cpu {
namespace {

std::vector<float> randomVector(int64_t count, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(engine);
  return values;
}

int64_t queryCount(const AttentionShape& s) { return s.batch * s.seq * s.heads * s.head_dim; }
int64_t kvCount(const AttentionShape& s) { return s.batch * s.seq * s.kv_heads * s.head_dim; }

// Random q, k, v and dout of a shape, and what each kernel makes of them.
struct Problem {
  explicit Problem(const AttentionShape& s)
      : shape(s),
        q(randomVector(queryCount(s), 1)),
        k(randomVector(kvCount(s), 2)),
        v(randomVector(kvCount(s), 3)),
        dout(randomVector(queryCount(s), 4)) {}

  struct Results {
    std::vector<float> out, dq, dk, dv;
  };

  // The blocked kernels, outputs first filled with NaN so that an element
  // left unwritten shows.
  Results blocked() const {
    Results r = empty();
    attention(q.data(), k.data(), v.data(), r.out.data(), shape);
    attentionGrad(q.data(), k.data(), v.data(), dout.data(), r.dq.data(), r.dk.data(), r.dv.data(),
                  shape);
    return r;
  }

  Results reference() const {
    Results r = empty();
    attentionReference(q.data(), k.data(), v.data(), r.out.data(), shape);
    attentionGradReference(q.data(), k.data(), v.data(), dout.data(), r.dq.data(), r.dk.data(),
                           r.dv.data(), shape);
    return r;
  }

  Results empty() const {
    const float nan = std::nanf("");
    return {std::vector<float>(q.size(), nan), std::vector<float>(q.size(), nan),
            std::vector<float>(k.size(), nan), std::vector<float>(k.size(), nan)};
  }

  AttentionShape shape;
  std::vector<float> q, k, v, dout;
};

// Every element within `rtol` of the reference's largest magnitude: the two
// kernels sum the same terms in different orders (and the blocked one
// rescales as its softmax runs), so they differ by fp32 rounding. The inputs
// are uniform in [-1, 1], so the terms are O(1): the scale is at least 1,
// which holds a gradient that is identically 0 (dq and dk at seq 1, a
// softmax over one key) to rtol absolute.
void expectClose(const std::vector<float>& actual, const std::vector<float>& want, const char* what,
                 double rtol = 1e-5) {
  ASSERT_EQ(actual.size(), want.size()) << what;
  double scale = 1.0;
  for (float value : want) scale = std::max(scale, double{std::abs(value)});
  int64_t wrong = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!(std::abs(double{actual[i]} - want[i]) <= rtol * scale) && ++wrong <= 5) {
      ADD_FAILURE() << what << " element " << i << ": " << actual[i] << " vs " << want[i]
                    << " (scale " << scale << ")";
    }
  }
  EXPECT_EQ(wrong, 0) << what;
}

void expectBitIdentical(const Problem::Results& a, const Problem::Results& b) {
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

// The tile is 64: sequences below, at, just over and past two tiles, and odd
// ones that leave a ragged last tile.
class BlockedAttentionTest : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(BlockedAttentionTest, MatchesTheScalarReference) {
  const Problem problem(GetParam());
  const Problem::Results got = problem.blocked();
  const Problem::Results want = problem.reference();
  expectClose(got.out, want.out, "out");
  expectClose(got.dq, want.dq, "dq");
  expectClose(got.dk, want.dk, "dk");
  expectClose(got.dv, want.dv, "dv");
}

TEST_P(BlockedAttentionTest, SameBitsRunToRun) {
  const Problem problem(GetParam());
  expectBitIdentical(problem.blocked(), problem.blocked());
}

std::string shapeName(const ::testing::TestParamInfo<AttentionShape>& info) {
  const AttentionShape& s = info.param;
  return "b" + std::to_string(s.batch) + "_s" + std::to_string(s.seq) + "_h" +
         std::to_string(s.heads) + "kv" + std::to_string(s.kv_heads) + "_d" +
         std::to_string(s.head_dim);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlockedAttentionTest,
    ::testing::Values(AttentionShape{1, 1, 4, 4, 8}, AttentionShape{2, 7, 4, 2, 16},
                      AttentionShape{3, 33, 8, 1, 8}, AttentionShape{1, 64, 4, 4, 64},
                      AttentionShape{2, 65, 4, 2, 32}, AttentionShape{1, 130, 4, 2, 64},
                      AttentionShape{2, 130, 8, 1, 16}, AttentionShape{1, 200, 2, 1, 128}),
    shapeName);

// Heads [head0, head0 + count) of a [B, S, heads, D] tensor, as a tensor of
// its own.
std::vector<float> sliceHeads(const std::vector<float>& x, const AttentionShape& s, int64_t heads,
                              int64_t head0, int64_t count) {
  std::vector<float> part;
  for (int64_t row = 0; row < s.batch * s.seq; ++row) {
    const auto begin = x.begin() + (row * heads + head0) * s.head_dim;
    part.insert(part.end(), begin, begin + count * s.head_dim);
  }
  return part;
}

// Tensor parallel: each rank holds half the query heads and the matching
// half of the kv heads (GQA groups stay whole).
TEST(BlockedAttentionSplitTest, HalvesOfTheHeadsGiveTheWholeCallsBits) {
  for (const AttentionShape& whole :
       {AttentionShape{2, 70, 4, 4, 32}, AttentionShape{2, 70, 8, 2, 16}}) {
    SCOPED_TRACE(whole.kv_heads);
    const Problem full(whole);
    const Problem::Results all = full.blocked();
    AttentionShape half = whole;
    half.heads /= 2;
    half.kv_heads /= 2;
    for (int64_t part = 0; part < 2; ++part) {
      Problem piece(half);
      piece.q = sliceHeads(full.q, whole, whole.heads, part * half.heads, half.heads);
      piece.dout = sliceHeads(full.dout, whole, whole.heads, part * half.heads, half.heads);
      piece.k = sliceHeads(full.k, whole, whole.kv_heads, part * half.kv_heads, half.kv_heads);
      piece.v = sliceHeads(full.v, whole, whole.kv_heads, part * half.kv_heads, half.kv_heads);
      const Problem::Results got = piece.blocked();
      const auto heads = [&](const std::vector<float>& x, int64_t n) {
        return sliceHeads(x, whole, n, part * (n / 2), n / 2);
      };
      expectBitIdentical(got, {heads(all.out, whole.heads), heads(all.dq, whole.heads),
                               heads(all.dk, whole.kv_heads), heads(all.dv, whole.kv_heads)});
    }
  }
}

// Data parallel: each rank holds some of the sequences.
TEST(BlockedAttentionSplitTest, EachSequenceAloneGivesTheWholeCallsBits) {
  const AttentionShape whole{3, 70, 4, 2, 32};
  const Problem full(whole);
  const Problem::Results all = full.blocked();
  AttentionShape one = whole;
  one.batch = 1;
  const int64_t q_rows = queryCount(one), kv_rows = kvCount(one);
  const auto rows = [](const std::vector<float>& x, int64_t b, int64_t n) {
    return std::vector<float>(x.begin() + b * n, x.begin() + (b + 1) * n);
  };
  for (int64_t b = 0; b < whole.batch; ++b) {
    Problem piece(one);
    piece.q = rows(full.q, b, q_rows);
    piece.dout = rows(full.dout, b, q_rows);
    piece.k = rows(full.k, b, kv_rows);
    piece.v = rows(full.v, b, kv_rows);
    expectBitIdentical(piece.blocked(), {rows(all.out, b, q_rows), rows(all.dq, b, q_rows),
                                         rows(all.dk, b, kv_rows), rows(all.dv, b, kv_rows)});
  }
}

}  // namespace
}  // namespace loom::runtime::cpu
