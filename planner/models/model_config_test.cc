// Tests of the zoo's configurations: parameter counts equal the published
// model sizes exactly, and bad specs are refused with a clear message.
#include "planner/models/model_config.h"

#include <iterator>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/models/published_sizes.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::models {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ModelConfigTest, ParameterCountsEqualPublishedSizes) {
  for (const PublishedSize& expected : kPublishedSizes) {
    absl::StatusOr<TransformerConfig> config = publishedConfig(expected.name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_TRUE(validateConfig(*config).ok()) << expected.name;
    EXPECT_EQ(parameterCount(*config), expected.parameters) << expected.name;
  }
  EXPECT_EQ(publishedConfigNames().size(), std::size(kPublishedSizes));
}

TEST(ModelConfigTest, NamesAreCaseInsensitive) {
  EXPECT_EQ(publishedConfig("Llama3-8B")->hidden, 4096);
}

TEST(ModelConfigTest, UnknownModelListsKnownOnes) {
  EXPECT_THAT(publishedConfig("llama4").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("'llama4'"), HasSubstr("llama3-8b"), HasSubstr("tiny"))));
}

TEST(ModelConfigTest, TinySpecSetsFields) {
  absl::StatusOr<TransformerConfig> config =
      configFromSpec("tiny:layers=3, hidden=32,heads=4,kv_heads=1,ffn=48,vocab=100,seq=8");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_layers, 3);
  EXPECT_EQ(config->hidden, 32);
  EXPECT_EQ(config->num_kv_heads, 1);
  EXPECT_EQ(config->headDim(), 8);
  // 2 * 100 * 32 + 3 * (2*32 + 2*32*32 + 2*32*8 + 3*32*48) + 32
  EXPECT_EQ(parameterCount(*config), 6400 + 3 * (64 + 2048 + 512 + 4608) + 32);

  absl::StatusOr<TransformerConfig> gpt = configFromSpec("tiny:family=gpt2,heads=2");
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_EQ(gpt->num_kv_heads, 2);
  EXPECT_EQ(configFromSpec("tiny")->name, "tiny");
}

TEST(ModelConfigTest, ParameterCountHasQkvBiasesAndTiedTablesOnce) {
  TransformerConfig c =
      *configFromSpec("tiny:layers=3,hidden=32,heads=4,kv_heads=1,ffn=48,vocab=100,seq=8");
  EXPECT_FALSE(c.tie_embeddings);
  const int64_t base = parameterCount(c);
  c.qkv_bias = true;
  // q: 32, k and v: one kv head of 8 each, in each of 3 layers.
  EXPECT_EQ(parameterCount(c), base + 3 * (32 + 2 * 8));
  c.tie_embeddings = true;
  EXPECT_EQ(parameterCount(c), base + 3 * (32 + 2 * 8) - 100 * 32);

  TransformerConfig gpt2 = *publishedConfig("gpt2");
  EXPECT_TRUE(gpt2.tie_embeddings);
  gpt2.tie_embeddings = false;
  EXPECT_EQ(parameterCount(gpt2), 124'439'808 + 50257 * 768);
}

TEST(ModelConfigTest, BadWindowsAndRopeScalingsAreRefused) {
  TransformerConfig c = *configFromSpec("tiny");
  c.sliding_window = -1;
  EXPECT_THAT(validateConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("sliding_window must be 0 (none) or positive, got -1")));
  c.sliding_window = 0;
  c.rope_scaling = {.factor = 0.0};
  EXPECT_THAT(validateConfig(c), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("rope scaling needs a positive finite factor")));
  c.rope_scaling = {.factor = 8.0,
                    .low_freq_factor = 4.0,
                    .high_freq_factor = 1.0,
                    .original_max_positions = 8192};
  EXPECT_THAT(validateConfig(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("needs 0 < low_freq_factor < high_freq_factor"),
                             HasSubstr("low_freq_factor 4, high_freq_factor 1"))));
}

TEST(ModelConfigTest, BadTinySpecsNameTheProblem) {
  EXPECT_THAT(configFromSpec("tiny:depth=2").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown key 'depth'"), HasSubstr("layers"))));
  EXPECT_THAT(configFromSpec("tiny:layers=two").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers='two'")));
  EXPECT_THAT(configFromSpec("tiny:hidden=30,heads=4").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("hidden 30"), HasSubstr("heads 4"))));
  EXPECT_THAT(configFromSpec("tiny:heads=4,kv_heads=3").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kv_heads 3")));
  EXPECT_THAT(
      configFromSpec("tiny:layers=0").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layers must be positive, got 0")));
  EXPECT_THAT(configFromSpec("tiny:hidden=12,heads=4").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head dim 3 is odd")));
  EXPECT_THAT(configFromSpec("tinyx").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected ':'")));
  EXPECT_THAT(configFromSpec("tiny:family=bert").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'bert'")));
}

}  // namespace
}  // namespace loom::planner::models
