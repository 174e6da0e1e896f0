// Tests LinePrefixer: whole lines pass at once, partial lines wait, the tail
// is flushed at the end, and an endless line is cut at kMaxLineBytes.
#include "tools/launch/line_prefixer.h"

#include <string>

#include "gtest/gtest.h"

namespace loom::launch {
namespace {

TEST(LinePrefixerTest, PrefixesEveryCompleteLine) {
  LinePrefixer lines("[rank 1] ");
  EXPECT_EQ(lines.feed("a\nb\n"), "[rank 1] a\n[rank 1] b\n");
  EXPECT_EQ(lines.feed("\n"), "[rank 1] \n");
  EXPECT_EQ(lines.finish(), "");
}

TEST(LinePrefixerTest, HoldsAPartialLineUntilItsNewline) {
  LinePrefixer lines("[rank 0] ");
  EXPECT_EQ(lines.feed("hel"), "");
  EXPECT_EQ(lines.feed("lo"), "");
  EXPECT_EQ(lines.feed(" world\nnext"), "[rank 0] hello world\n");
  EXPECT_EQ(lines.feed("\n"), "[rank 0] next\n");
}

TEST(LinePrefixerTest, FinishFlushesTheLastLineWithANewline) {
  LinePrefixer lines("[rank 2] ");
  EXPECT_EQ(lines.feed("done\nno newline"), "[rank 2] done\n");
  EXPECT_EQ(lines.finish(), "[rank 2] no newline\n");
  EXPECT_EQ(lines.finish(), "");
}

TEST(LinePrefixerTest, CutsLinesLongerThanTheLimit) {
  LinePrefixer lines("> ");
  const std::string chunk(kMaxLineBytes / 2 + 1, 'x');
  EXPECT_EQ(lines.feed(chunk), "");
  const std::string out = lines.feed(chunk);
  EXPECT_EQ(out, "> " + std::string(kMaxLineBytes, 'x') + "\n");
  EXPECT_EQ(lines.finish(), "> xx\n");
}

}  // namespace
}  // namespace loom::launch
