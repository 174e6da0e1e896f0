// Wiring test for OpenBLAS: a single-precision GEMM through the CBLAS API
// agrees with a naive triple loop.
#include <cmath>
#include <vector>

#include "cblas.h"
#include "gtest/gtest.h"

namespace {

TEST(OpenblasWiringTest, SgemmMatchesNaiveProduct) {
  constexpr int m = 37, n = 29, k = 53;  // odd sizes exercise the edge kernels
  std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f), expected(m * n, 0.0f);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>((i * 3) % 13) - 6.0f;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) expected[i * n + j] += a[i * k + p] * b[p * n + j];

  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
              0.0f, c.data(), n);

  for (int i = 0; i < m * n; ++i) ASSERT_FLOAT_EQ(c[i], expected[i]) << "element " << i;
  EXPECT_GT(openblas_get_num_threads(), 0);
}

}  // namespace
