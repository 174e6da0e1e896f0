// Tests of Hugging Face weights in and out of the runtime, every rank a
// thread: a sharded plan loads the same weights as a one-rank plan (same
// loss; zoo Llama and GPT-2, and a Qwen2 planned from its config.json), each rank reads only its
// shards' bytes, a tied head reads the embedding, export from 4 ranks gives back the file it loaded
// (one file and sharded with an index), and a missing tensor or a wrong shape is named.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/half_float.h"
#include "comm/hash_store.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/shard_box.h"
#include "runtime/data/token_feed.h"
#include "runtime/hf/hf_executor.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime::hf {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

plan::Plan loadTestPlan(const std::string& name) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath(name));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : plan::Plan{};
}

std::string freshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/hf_", info->test_suite_name(), "_", info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Hugging Face weights for `plan`'s model: every element distinct, small
// enough to train with, exact in bf16 when `dtype` is BF16.
std::vector<TensorData> weightsFor(const plan::Plan& plan, StDType dtype) {
  absl::StatusOr<std::vector<TensorSpec>> specs = exportedTensors(plan);
  EXPECT_TRUE(specs.ok()) << specs.status();
  std::vector<TensorData> tensors;
  for (size_t t = 0; specs.ok() && t < specs->size(); ++t) {
    TensorSpec spec = (*specs)[t];
    spec.dtype = dtype;
    std::vector<float> values(checkpoint::numElements(spec.shape));
    const bool norm =
        spec.name.find("norm") != std::string::npos || spec.name.find("ln_") != std::string::npos;
    for (size_t i = 0; i < values.size(); ++i) {
      const float wave = 0.05f * std::sin(0.37f * static_cast<float>(i) + 1.3f * t);
      values[i] = norm && spec.name.find("bias") == std::string::npos ? 1.0f + wave : wave;
    }
    tensors.push_back({spec, std::move(values)});
  }
  return tensors;
}

std::string writeWeights(const std::vector<TensorData>& tensors, const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  EXPECT_TRUE(writeSafetensors(path, tensors).ok());
  return path;
}

struct RankRun {
  double loss = 0;  // rank 0's first step
  std::vector<int64_t> bytes_read;
};

// Loads `weights` into every rank of `plan` and runs one step on a fixed
// batch; `after` runs on every rank once the step is done (or right after
// the load when `steps` is 0).
RankRun loadAndRun(const plan::Plan& plan, const std::string& weights, int steps = 1,
                   const std::function<void(Executor&, comm::Store&)>& after = {}) {
  RankRun run;
  const int world = static_cast<int>(plan.worldSize());
  run.bytes_read.assign(world, 0);
  std::mutex mu;
  auto store = std::make_shared<comm::HashStore>();
  comm::ProcessGroupOptions options;
  comm::testing::runRanksShared(
      world,
      [&](std::shared_ptr<comm::ProcessGroup> group) {
        absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(plan, group);
        ASSERT_TRUE(executor.ok()) << executor.status();
        Executor& e = **executor;
        absl::StatusOr<LoadReport> report = loadHfWeights(e, weights);
        ASSERT_TRUE(report.ok()) << report.status();
        absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> feed = data::SyntheticTokens::create(
            {.seed = 5, .vocab = e.vocab(), .seq = e.seqLength(), .global_batch = e.stepBatch()});
        ASSERT_TRUE(feed.ok()) << feed.status();
        const data::RowRange rows = e.batchRows();
        std::vector<int32_t> ids(rows.count * e.seqLength()), labels(ids.size());
        ASSERT_TRUE((*feed)->batch(1, rows.begin, rows.count, ids.data(), labels.data()).ok());
        for (int step = 1; step <= steps; ++step) {
          absl::StatusOr<StepResult> result = e.step(step, ids.data(), labels.data());
          ASSERT_TRUE(result.ok()) << result.status();
          std::lock_guard<std::mutex> lock(mu);
          if (group->rank() == 0 && step == 1) run.loss = result->loss;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          run.bytes_read[group->rank()] = report->bytes_read;
        }
        if (after) after(e, *store);
      },
      options, store);
  return run;
}

// The bytes a rank must read: its box of every parameter and master copy.
int64_t ownBytes(const plan::Plan& plan, int64_t rank, int64_t element_bytes) {
  absl::StatusOr<std::vector<int64_t>> coords = plan.mesh.coordinateOf(rank);
  EXPECT_TRUE(coords.ok());
  int64_t bytes = 0;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.role != plan::BufferRole::kParam && b.name.rfind("master:", 0) != 0) continue;
    absl::StatusOr<plan::ShardBox> box = plan::shardBoxOf(b, plan.mesh, *coords);
    EXPECT_TRUE(box.ok());
    bytes += checkpoint::numElements(box->valid) * element_bytes;
  }
  return bytes;
}

class ShardedLoad : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ShardedLoad, GivesTheOneRankLossAndReadsOnlyOwnShards) {
  const auto [single, sharded] = GetParam();
  const plan::Plan one = loadTestPlan(single);
  const plan::Plan four = loadTestPlan(sharded);
  const std::string weights = writeWeights(weightsFor(one, StDType::kF32), freshDir());
  const RankRun a = loadAndRun(one, weights);
  const RankRun b = loadAndRun(four, weights);
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(a.loss)) << single << " vs " << sharded;
  // Not the init's loss: log(vocab) would mean nothing was loaded.
  EXPECT_GT(std::abs(a.loss - std::log(static_cast<double>(one.interface.vocab))), 1e-3);
  for (int64_t r = 0; r < four.worldSize(); ++r) {
    EXPECT_EQ(b.bytes_read[r], ownBytes(four, r, 4)) << "rank " << r;
  }
  EXPECT_LT(b.bytes_read[0], a.bytes_read[0]);
}

INSTANTIATE_TEST_SUITE_P(Models, ShardedLoad,
                         ::testing::Values(std::pair{"llama_single", "llama_fsdp2_tp2"},
                                           std::pair{"gpt2_single", "gpt2_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_fsdp4"},
                                           // Hugging Face names (a config.json's plan):
                                           // q/k/v biases, the head tied to the embedding.
                                           std::pair{"hf_qwen2_single", "hf_qwen2_fsdp2_tp2"}));

TEST(HfLoad, TiedHeadReadsTheEmbedding) {
  const plan::Plan plan = loadTestPlan("llama_single");
  std::vector<TensorData> untied = weightsFor(plan, StDType::kF32);
  std::vector<TensorData> tied;
  const std::vector<float>* embed = nullptr;
  for (const TensorData& t : untied) {
    if (t.spec.name == "model.embed_tokens.weight") embed = &t.values;
  }
  ASSERT_NE(embed, nullptr);
  for (TensorData& t : untied) {
    if (t.spec.name == "lm_head.weight") {
      t.values = *embed;  // the untied file's head equals the embedding
    } else {
      tied.push_back(t);
    }
  }
  const std::string dir = freshDir();
  std::filesystem::create_directories(dir + "/tied");
  const RankRun a = loadAndRun(plan, writeWeights(untied, dir));
  const RankRun b = loadAndRun(plan, writeWeights(tied, dir + "/tied"));
  EXPECT_EQ(a.loss, b.loss);
}

TEST(HfLoad, Bf16PlanSetsMasterCopies) {
  const plan::Plan plan = loadTestPlan("llama_bf16_fsdp2_tp2");
  const std::vector<TensorData> weights = weightsFor(plan, StDType::kF32);
  const std::string path = writeWeights(weights, freshDir());
  loadAndRun(plan, path, 0, [&](Executor& e, comm::Store&) {
    for (const plan::Buffer& b : e.plan().buffers) {
      if (b.role != plan::BufferRole::kParam) continue;
      absl::StatusOr<std::vector<float>> param = e.localValues(b.name);
      absl::StatusOr<std::vector<float>> master = e.localValues("master:" + b.name);
      ASSERT_TRUE(param.ok() && master.ok()) << b.name;
      bool differs = false;
      for (size_t i = 0; i < param->size(); ++i) {
        ASSERT_EQ((*param)[i], comm::bfloat16ToFloat(comm::floatToBfloat16((*master)[i])));
        differs |= (*param)[i] != (*master)[i];
      }
      // The master holds the file's f32 values, not their bf16 rounding.
      EXPECT_TRUE(differs || param->empty()) << b.name;
    }
  });
}

// Loads `weights` on every rank of `name` and exports right away: the
// export must be the file, bit for bit.
void expectExportRoundTrip(const std::string& name, StDType dtype, int64_t max_file_bytes,
                           bool sharded) {
  const plan::Plan plan = loadTestPlan(name);
  const std::string dir = freshDir();
  const std::vector<TensorData> weights = weightsFor(plan, dtype);
  const std::string path = writeWeights(weights, dir);
  const std::string out = dir + "/export";
  loadAndRun(plan, path, 0, [&](Executor& e, comm::Store& store) {
    const absl::Status s = exportHfWeights(
        e, store, plan.worldSize(),
        {.dir = out, .max_file_bytes = max_file_bytes, .timeout = absl::Seconds(30)});
    EXPECT_TRUE(s.ok()) << s;
  });
  EXPECT_EQ(std::filesystem::exists(out + "/" + kIndexFileName), sharded);
  absl::StatusOr<SafetensorsSet> set = SafetensorsSet::open(out);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->names().size(), weights.size());
  for (const TensorData& t : weights) {
    const TensorEntry* entry = set->find(t.spec.name);
    ASSERT_NE(entry, nullptr) << t.spec.name;
    EXPECT_EQ(entry->shape, t.spec.shape) << t.spec.name;
    std::vector<float> back(t.values.size());
    ASSERT_TRUE(set->readBox(t.spec.name,
                             {std::vector<int64_t>(t.spec.shape.size(), 0), t.spec.shape}, back)
                    .ok());
    std::vector<float> expected = t.values;
    if (dtype == StDType::kBF16) {
      for (float& v : expected) v = comm::bfloat16ToFloat(comm::floatToBfloat16(v));
    }
    EXPECT_EQ(back, expected) << t.spec.name;
  }
}

TEST(HfExport, LlamaFsdp2Tp2OneFile) {
  expectExportRoundTrip("llama_fsdp2_tp2", StDType::kF32, int64_t{1} << 30, false);
}

TEST(HfExport, Gpt2Fsdp2Tp2ShardedWithIndex) {
  // 64 KiB files: GPT-2's fused c_attn comes back whole from its 3 slices.
  expectExportRoundTrip("gpt2_fsdp2_tp2", StDType::kF32, 64 << 10, true);
}

TEST(HfExport, Qwen2Fsdp2Tp2OneFile) {
  expectExportRoundTrip("hf_qwen2_fsdp2_tp2", StDType::kF32, int64_t{1} << 30, false);
}

TEST(HfExport, Bf16PlanExportsBf16) {
  expectExportRoundTrip("llama_bf16_fsdp2_tp2", StDType::kBF16, 64 << 10, true);
}

TEST(HfLoad, MissingTensorIsNamed) {
  const plan::Plan plan = loadTestPlan("gpt2_single");
  std::vector<TensorData> weights = weightsFor(plan, StDType::kF32);
  std::erase_if(weights, [](const TensorData& t) {
    return t.spec.name == "transformer.h.1.attn.c_attn.weight";
  });
  const std::string path = writeWeights(weights, freshDir());
  absl::StatusOr<SafetensorsSet> set = SafetensorsSet::open(path);
  ASSERT_TRUE(set.ok());
  EXPECT_THAT(matchParameters(plan, *set).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr(path), HasSubstr("'transformer.h.1.attn.c_attn.weight'"),
                             HasSubstr("parameter 'transformer.h.1.attn.c_attn.weight[:, 0:"))));
}

TEST(HfLoad, ShapeMismatchIsNamed) {
  const plan::Plan plan = loadTestPlan("llama_single");
  std::vector<TensorData> weights = weightsFor(plan, StDType::kF32);
  for (TensorData& t : weights) {
    if (t.spec.name == "model.layers.0.self_attn.q_proj.weight") {
      // The [in, out] layout by mistake: a square weight would pass.
      std::swap(t.spec.shape[0], t.spec.shape[1]);
      t.spec.shape[0] += 1;
      t.values.resize(checkpoint::numElements(t.spec.shape));
    }
  }
  const std::string path = writeWeights(weights, freshDir());
  absl::StatusOr<SafetensorsSet> set = SafetensorsSet::open(path);
  ASSERT_TRUE(set.ok());
  EXPECT_THAT(matchParameters(plan, *set).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("'model.layers.0.self_attn.q_proj.weight'"),
                             HasSubstr("'layers.0.attention.wq.weight'"))));
}

TEST(HfNames, Tables) {
  absl::StatusOr<HfSource> wq = hfSourceOf("layers.3.attention.wq.weight");
  ASSERT_TRUE(wq.ok());
  EXPECT_EQ(wq->tensor, "model.layers.3.self_attn.q_proj.weight");
  EXPECT_TRUE(wq->transpose);
  absl::StatusOr<HfSource> w2 = hfSourceOf("layers.0.feed_forward.w2.weight");
  ASSERT_TRUE(w2.ok());
  EXPECT_EQ(w2->tensor, "model.layers.0.mlp.down_proj.weight");
  absl::StatusOr<HfSource> qkv = hfSourceOf("transformer.h.0.attn.c_attn.bias[64:128]");
  ASSERT_TRUE(qkv.ok());
  EXPECT_EQ(qkv->tensor, "transformer.h.0.attn.c_attn.bias");
  EXPECT_EQ(qkv->slice_dim, 0);
  EXPECT_EQ(qkv->slice_begin, 64);
  absl::StatusOr<HfSource> hf = hfSourceOf("model.layers.1.mlp.up_proj.weight");
  ASSERT_TRUE(hf.ok());
  EXPECT_TRUE(hf->transpose);
  EXPECT_FALSE(hfSourceOf("model.layers.1.input_layernorm.weight")->transpose);
  EXPECT_THAT(hfSourceOf("layers.0.attention.wz.weight").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'layers.0.attention.wz")));
}

}  // namespace
}  // namespace loom::runtime::hf
