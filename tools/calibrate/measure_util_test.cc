// Tests of the calibration helpers: median, byte sizes and GEMM shapes.
#include "tools/calibrate/measure_util.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::calibrate {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

TEST(MeasureUtilTest, Median) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
}

TEST(MeasureUtilTest, ParseBytes) {
  EXPECT_EQ(*parseBytes("4096"), 4096);
  EXPECT_EQ(*parseBytes("4K"), 4096);
  EXPECT_EQ(*parseBytes("64M"), int64_t{64} << 20);
  EXPECT_EQ(*parseBytes("1G"), int64_t{1} << 30);
  EXPECT_THAT(parseBytes("0").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'0'")));
  EXPECT_THAT(parseBytes("four").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("e.g. 4096, 4K, 64M")));
}

TEST(MeasureUtilTest, ParseGemmShapes) {
  absl::StatusOr<std::vector<GemmShape>> shapes = parseGemmShapes("128,64x32x16");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->size(), 2u);
  EXPECT_EQ((*shapes)[0].m, 128);
  EXPECT_EQ((*shapes)[0].k, 128);
  EXPECT_EQ((*shapes)[1].m, 64);
  EXPECT_EQ((*shapes)[1].n, 32);
  EXPECT_EQ((*shapes)[1].k, 16);
  for (const char* bad : {"64x32", "64x0x2", "x", "1x2x3x4", "axbxc"}) {
    EXPECT_THAT(parseGemmShape(bad).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MxNxK")))
        << bad;
  }
  EXPECT_THAT(parseGemmShapes(",").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no GEMM shape")));
}

}  // namespace
}  // namespace loom::calibrate
