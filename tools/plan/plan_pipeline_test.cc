// Tests of the plan tool's flag handling: --mesh/--axes into the placement
// pass's mesh spec, the topology a mesh runs on, the checks of a given mesh
// (--devices, tp across hosts), and --grad-reduce-dtype through the
// pipeline.
#include "tools/plan/plan_pipeline.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "plan/plan.h"
#include "tools/plan/model_loader.h"

namespace loom::tools::plan {
namespace {

TEST(PlanPipelineTest, MeshSpecNamesSizesByAxes) {
  EXPECT_EQ(*meshSpec("8x8", "fsdp,tp"), "fsdp=8,tp=8");
  EXPECT_EQ(*meshSpec("fsdp=4,tp=2", ""), "fsdp=4,tp=2");
  EXPECT_EQ(meshSpec("8x8", "fsdp").status().message(),
            "--mesh=8x8 has 2 axes but --axes='fsdp' names 1; give one strategy per mesh axis, "
            "e.g. --mesh=8x8 --axes=fsdp,tp");
  EXPECT_EQ(meshSpec("0x2", "fsdp,tp").status().message(),
            "--mesh=0x2: axis size '0' is not a positive integer; write sizes joined by x, e.g. "
            "--mesh=8x8");
}

// An explicit mesh's default batch: one sequence per dp and fsdp rank.
TEST(PlanPipelineTest, DataParallelSizeMultipliesTheDataAxes) {
  EXPECT_EQ(*dataParallelSize("8", "fsdp"), 8);
  EXPECT_EQ(*dataParallelSize("2x4x8", "dp,fsdp,tp"), 8);
  EXPECT_EQ(*dataParallelSize("fsdp=4,tp=2", ""), 4);
  EXPECT_EQ(*dataParallelSize("rep=2,shard=4", "dp,fsdp"), 8);
  EXPECT_EQ(*dataParallelSize("tp=8", ""), 1);
  EXPECT_FALSE(dataParallelSize("8x8", "fsdp").ok());
}

// --recompute=auto plans the least recompute whose peak fits the budget:
// none with room, more as the budget shrinks, and the memory error when
// even full recompute does not fit.
TEST(PlanPipelineTest, AutoRecomputeTakesTheLeastThatFits) {
  auto planWith = [](double memoryGb) {
    mlir::MLIRContext context;
    auto module = loadModel(context, {.model = "tiny:seq=128", .batch = 4, .seq = 128});
    EXPECT_TRUE(module.ok()) << module.status();
    return planModule(**module, {.model_name = "tiny",
                                 .mesh = "fsdp=2",
                                 .device = "cpu",
                                 .memory_gb = memoryGb,
                                 .recompute = "auto"});
  };
  absl::StatusOr<PlanResult> roomy = planWith(1.0);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_EQ(roomy->recompute, "none");
  const int64_t none = roomy->plan.predicted.peak_bytes;
  // Between the full recompute's peak and no recompute's.
  absl::StatusOr<PlanResult> tight = planWith(3.0e6 / (1 << 30));
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_NE(tight->recompute, "none");
  EXPECT_LE(tight->plan.predicted.peak_bytes, 3'000'000);
  EXPECT_LT(tight->plan.predicted.peak_bytes, none);
  absl::StatusOr<PlanResult> tiny = planWith(1.0e6 / (1 << 30));
  EXPECT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("over the"), std::string::npos) << tiny.status();
}

// Per layer, auto mixes full, selective and none layers: under a budget
// between all-full's and all-selective's peak, its plan fits and is at
// least as fast as every uniform choice that fits (every mode, every k-th
// layer).
TEST(PlanPipelineTest, AutoRecomputeMixesModesPerLayer) {
  auto planWith = [](PlanRequest request) {
    mlir::MLIRContext context;
    auto module = loadModel(context, {.model = "tiny:layers=8,seq=128", .batch = 4, .seq = 128});
    EXPECT_TRUE(module.ok()) << module.status();
    request.model_name = "tiny";
    request.mesh = "fsdp=2";
    request.device = "cpu";
    return planModule(**module, request);
  };
  struct Uniform {
    const char* mode;
    int64_t every;
  };
  std::vector<std::pair<int64_t, double>> uniform;  // (peak, step time)
  for (const Uniform& u : {Uniform{"none", 1}, Uniform{"selective", 1}, Uniform{"full", 4},
                           Uniform{"full", 2}, Uniform{"full", 1}}) {
    absl::StatusOr<PlanResult> planned =
        planWith({.memory_gb = 100, .recompute = u.mode, .recompute_every = u.every});
    ASSERT_TRUE(planned.ok()) << planned.status();
    uniform.emplace_back(planned->plan.predicted.peak_bytes, planned->plan.predicted.step_time_s);
  }
  const int64_t budget = (uniform[1].first + uniform[4].first) / 2;
  absl::StatusOr<PlanResult> mixed =
      planWith({.memory_gb = static_cast<double>(budget) / (1 << 30), .recompute = "auto"});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_LE(mixed->plan.predicted.peak_bytes, budget);
  EXPECT_NE(mixed->recompute.find(':'), std::string::npos) << mixed->recompute;
  for (const auto& [peak, step] : uniform) {
    if (peak <= budget) {
      EXPECT_LE(mixed->plan.predicted.step_time_s, step) << mixed->recompute;
    }
  }
  // The mix as asked for explicitly is the same plan.
  absl::StatusOr<PlanResult> explicitMix = planWith(
      {.memory_gb = 100,
       .recompute = "none",
       .recompute_layers = mixed->recompute.substr(0, mixed->recompute.rfind(','))});
  ASSERT_TRUE(explicitMix.ok()) << explicitMix.status();
  EXPECT_EQ(explicitMix->plan.predicted.peak_bytes, mixed->plan.predicted.peak_bytes);
}

TEST(PlanPipelineTest, TopologyFillsWholeHosts) {
  PlanRequest request;
  auto topology = topologyFor(request, 64);
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->numHosts(), 8);
  EXPECT_EQ(topology->devicesPerHost(), 8);
  auto small = topologyFor(request, 4);  // fewer devices than a host holds
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->numHosts(), 1);
  EXPECT_EQ(small->devicesPerHost(), 4);
  EXPECT_EQ(topologyFor(request, 12).status().message(),
            "the mesh has 12 devices, not a multiple of --devices-per-host=8; change the mesh so "
            "its product fills whole hosts");
  request.device = "tpu";
  EXPECT_FALSE(topologyFor(request, 8).ok());
}

TEST(PlanPipelineTest, AMeshMustHaveTheGivenDeviceCount) {
  PlanRequest request{.mesh = "8x8", .axes = "fsdp,tp"};
  EXPECT_TRUE(checkMesh(request, 64, false).ok());
  EXPECT_TRUE(checkMesh(request, 0, false).ok());  // no --devices: nothing to compare
  EXPECT_EQ(checkMesh(request, 128, false).status().message(),
            "--mesh=8x8 has 8 x 8 = 64 devices but --devices=128; make the mesh's product equal "
            "the device count, or let the planner choose with --mesh=auto --devices=128");
}

TEST(PlanPipelineTest, TensorParallelismAcrossHostsIsRefusedOrWarned) {
  // tp innermost and within a host: fine.
  PlanRequest request{.mesh = "4x8", .axes = "fsdp,tp"};
  absl::StatusOr<std::vector<std::string>> warnings = checkMesh(request, 0, false);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_TRUE(warnings->empty());
  // tp outermost: each tp group takes one rank of every host.
  request.axes = "tp,fsdp";
  request.mesh = "4x8";
  const std::string what =
      "the tp axis 'tp' (size 4) spans 4 hosts of 8 devices, so its all-reduces cross "
      "infiniband (50 GB/s per device instead of 450 GB/s on nvlink)";
  EXPECT_EQ(checkMesh(request, 32, false).status().message(),
            what +
                "; keep tp inside a host (a size dividing 8, as the last mesh axis) or pass "
                "--allow-tp-across-hosts");
  warnings = checkMesh(request, 32, true);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_EQ(*warnings, std::vector<std::string>{"warning: " + what});
  // Named axes: the strategy is the name when --axes is empty.
  request = {.mesh = "fsdp=2,tp=16"};
  EXPECT_FALSE(checkMesh(request, 0, false).ok());
}

// Plans the tiny bf16 Llama under fsdp=2 with `grad_reduce_dtype`.
loom::plan::Plan planTinyBf16(const std::string& grad_reduce_dtype) {
  mlir::MLIRContext context;
  auto module = loadModel(
      context, {.model = "tiny:family=llama,layers=2,hidden=64,heads=4,kv_heads=2,ffn=128,"
                         "vocab=256,seq=16",
                .batch = 4,
                .dtype = "bf16"});
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  PlanRequest request{.model_name = "tiny",
                      .mesh = "2",
                      .axes = "fsdp",
                      .device = "cpu",
                      .grad_reduce_dtype = grad_reduce_dtype};
  auto result = planModule(**module, request);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->plan : loom::plan::Plan();
}

int64_t reduceScatterBytes(const loom::plan::Plan& plan) {
  for (const loom::plan::CommVolume& entry : plan.predicted.comm_volume) {
    if (entry.kind == "reduce_scatter") return entry.bytes;
  }
  return 0;
}

TEST(PlanPipelineTest, GradReduceDtypeWidensGradientsDownstream) {
  const loom::plan::Plan bf16 = planTinyBf16("");
  const loom::plan::Plan f32 = planTinyBf16("f32");
  ASSERT_FALSE(bf16.buffers.empty());
  ASSERT_FALSE(f32.buffers.empty());
  // Gradient buffers at the reduce type, twice the bytes of the bf16 ones.
  int64_t grads = 0, bf16Bytes = 0, f32Bytes = 0;
  for (const auto& [plan, dtype, bytes] :
       {std::tuple{&bf16, "bf16", &bf16Bytes}, std::tuple{&f32, "f32", &f32Bytes}}) {
    for (const loom::plan::Buffer& buffer : plan->buffers) {
      if (buffer.role != loom::plan::BufferRole::kGrad) continue;
      EXPECT_EQ(comm::dtypeName(buffer.dtype), dtype) << buffer.name;
      *bytes += buffer.bytes;
      if (plan == &f32) ++grads;
    }
  }
  EXPECT_EQ(grads, 21);
  EXPECT_EQ(f32Bytes, 2 * bf16Bytes);
  // The reduce-scatters move f32, twice the bytes.
  EXPECT_GT(reduceScatterBytes(bf16), 0);
  EXPECT_EQ(reduceScatterBytes(f32), 2 * reduceScatterBytes(bf16));
  // AdamW streams per element param 2 x 2, moments 4 x 4, master 2 x 4 and
  // the grad once: 30 bytes with a bf16 grad, 32 with an f32 one.
  EXPECT_NEAR(f32.predicted.optimizer_s / bf16.predicted.optimizer_s, 32.0 / 30.0, 1e-12);
}

TEST(PlanPipelineTest, GradReduceDtypeMustBeBf16OrF32) {
  mlir::MLIRContext context;
  auto module = loadModel(context, {.model = "tiny", .batch = 2, .dtype = "bf16"});
  ASSERT_TRUE(module.ok()) << module.status();
  PlanRequest request{.mesh = "2", .axes = "fsdp", .device = "cpu", .grad_reduce_dtype = "f16"};
  EXPECT_EQ(planModule(**module, request).status().message(),
            "--grad-reduce-dtype='f16' is not a gradient reduction type; use bf16 or f32, or omit "
            "it to reduce gradients in the parameter type");
}

}  // namespace
}  // namespace loom::tools::plan
