// Tests of the plan tool's model loading: zoo defaults and options,
// Hugging Face config.json files, .mlir files, and the errors for bad
// requests, configs and IR.
#include "tools/plan/model_loader.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "tests/testing/status_matchers.h"

namespace loom::tools::plan {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string writeFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

mlir::RankedTensorType argType(mlir::ModuleOp module, unsigned index) {
  auto func = *module.getOps<mlir::func::FuncOp>().begin();
  return llvm::cast<mlir::RankedTensorType>(func.getArgument(index).getType());
}

TEST(ModelLoaderTest, ZooModelsDefaultToBatchOneAndCappedSeq) {
  mlir::MLIRContext context;
  auto gpt2 = loadModel(context, {.model = "gpt2"});
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ(argType(**gpt2, 0).getShape(), (llvm::ArrayRef<int64_t>{1, 1024}));
  EXPECT_TRUE(argType(**gpt2, 3).getElementType().isF32());

  auto llama = loadModel(context, {.model = "llama2-7b"});
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(argType(**llama, 0).getShape(), (llvm::ArrayRef<int64_t>{1, kDefaultSeqCap}));
}

TEST(ModelLoaderTest, ZooOptionsSetShapeAndType) {
  mlir::MLIRContext context;
  auto tiny = loadModel(context, {.model = "tiny:layers=1", .batch = 4, .seq = 8, .dtype = "bf16"});
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(argType(**tiny, 1).getShape(), (llvm::ArrayRef<int64_t>{4, 8}));
  EXPECT_TRUE(argType(**tiny, 2).getElementType().isBF16());
}

TEST(ModelLoaderTest, BadZooRequestsSayWhatIsWrong) {
  mlir::MLIRContext context;
  EXPECT_THAT(loadModel(context, {.model = "gpt5"}).status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("unknown model 'gpt5'"), HasSubstr("llama3-405b"))));
  EXPECT_THAT(loadModel(context, {.model = "gpt2", .dtype = "f8"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--dtype='f8' is not a parameter type; use f32, bf16 or f16")));
  EXPECT_THAT(loadModel(context, {.model = "gpt2", .seq = 4096}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("seq 4096 exceeds")));
}

std::string hfConfig(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/loom/planner/models/testdata/" + name;
}

TEST(ModelLoaderTest, HuggingFaceConfigsBuildLikeZooModels) {
  mlir::MLIRContext context;
  auto qwen = loadModel(
      context,
      {.model = hfConfig("qwen2.5-0.5b.config.json"), .batch = 2, .seq = 16, .dtype = "bf16"});
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  auto func = *(*qwen)->getOps<mlir::func::FuncOp>().begin();
  EXPECT_EQ(func.getSymName(), "Qwen_Qwen2_5_0_5B");
  EXPECT_EQ(argType(**qwen, 0).getShape(), (llvm::ArrayRef<int64_t>{2, 16}));
  EXPECT_TRUE(argType(**qwen, 2).getElementType().isBF16());

  // Without --seq: max_position_embeddings capped at kDefaultSeqCap.
  auto mistral = loadModel(context, {.model = hfConfig("mistral-7b-v0.1.config.json")});
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ(argType(**mistral, 0).getShape(), (llvm::ArrayRef<int64_t>{1, kDefaultSeqCap}));
}

TEST(ModelLoaderTest, SlidingWindowCapsTheDefaultSeqAndRefusesLongerOnes) {
  const std::string path = writeFile("windowed.config.json", R"json({
    "model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
    "vocab_size": 256, "max_position_embeddings": 64, "sliding_window": 16})json");
  mlir::MLIRContext context;
  auto module = loadModel(context, {.model = path});
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(argType(**module, 0).getShape(), (llvm::ArrayRef<int64_t>{1, 16}));
  EXPECT_THAT(loadModel(context, {.model = path, .seq = 32}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("seq 32 exceeds the model's sliding_window 16"),
                             HasSubstr("plan with --seq <= 16"))));
}

TEST(ModelLoaderTest, BadHuggingFaceConfigsSayWhatIsWrong) {
  mlir::MLIRContext context;
  const std::string missing = ::testing::TempDir() + "/missing/config.json";
  EXPECT_THAT(loadModel(context, {.model = missing}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot read config '" + missing + "'")));
  const std::string moe = writeFile("moe.config.json", R"json({
    "model_type": "mixtral", "num_local_experts": 8, "hidden_size": 64})json");
  EXPECT_THAT(loadModel(context, {.model = moe}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("num_local_experts = 8 is not supported; mixture-of-experts")));
}

TEST(ModelLoaderTest, LoadsAndVerifiesMlirFiles) {
  const std::string path = writeFile("ok.mlir", R"mlir(
func.func @f(%x: tensor<2x4xf32>, %w: tensor<4x3xf32> {nn.param}) -> tensor<2x3xf32> {
  %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
)mlir");
  mlir::MLIRContext context;
  auto module = loadModel(context, {.model = path});
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ(argType(**module, 1).getShape(), (llvm::ArrayRef<int64_t>{4, 3}));
}

TEST(ModelLoaderTest, InvalidFilesReportDiagnosticsWithLocations) {
  const std::string path = writeFile("bad.mlir", R"mlir(
func.func @f(%x: tensor<2x4xf32>, %w: tensor<3x4xf32> {nn.param}) -> tensor<2x4xf32> {
  %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
)mlir");
  mlir::MLIRContext context;
  EXPECT_THAT(loadModel(context, {.model = path}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("does not parse or verify"),
                             HasSubstr(path + ":3:8: error: 'nn.linear' op input features"),
                             HasSubstr("fix the IR at the locations above"))));

  EXPECT_THAT(loadModel(context, {.model = writeFile("empty.mlir", "")}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds no func.func")));
  EXPECT_THAT(loadModel(context, {.model = ::testing::TempDir() + "/missing.mlir"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot read model file")));
  EXPECT_THAT(
      loadModel(context, {.model = path, .seq = 8}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--seq applies to zoo models only")));
}

}  // namespace
}  // namespace loom::tools::plan
