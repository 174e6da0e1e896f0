// The runtime's view of plan.json (docs/plan_json.md): buffers with their
// placements and init specs, the SPMD instruction stream of each phase, and
// the interface (ids, labels, loss). loadPlan parses and checks everything
// that does not depend on the job; checkPlanForJob checks the rest.
#ifndef LOOM_RUNTIME_PLAN_PLAN_H_
#define LOOM_RUNTIME_PLAN_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/tensor.h"
#include "mesh/device_mesh.h"
#include "nlohmann/json.hpp"
#include "runtime/init/counter_rng.h"

namespace loom::runtime {

// The format version this runtime reads.
inline constexpr int kPlanFormatVersion = 1;

enum class BufferRole { kParam, kGrad, kOptimizerState, kActivation, kGathered };
std::string bufferRoleName(BufferRole role);

// One mesh axis's entry of a placement (docs/planner_dist.md).
struct AxisPlacement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = -1;        // kShard
  bool padded = false;     // kShard
  std::string reduction;   // kPartial: sum, avg, max, min
  std::string toString() const;
};

struct BufferSpec {
  int64_t id = 0;
  std::string name;
  comm::DType dtype = comm::DType::kFloat32;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> local_shape;
  int64_t bytes = 0;  // per rank, padding included
  BufferRole role = BufferRole::kActivation;
  std::vector<AxisPlacement> placement;  // one per mesh axis
  std::optional<init::InitSpec> init;
  int64_t numel() const;
};

enum class Phase { kForward, kBackward, kOptimizer };
std::string phaseName(Phase phase);

struct Instruction {
  Phase phase = Phase::kForward;
  int64_t position = 0;  // in its phase's list, for messages
  int64_t index = 0;     // the op's index in the planned function (-1: synthesized)
  std::string op;
  std::vector<int64_t> operands;
  std::vector<int64_t> results;
  bool comm_stream = false;
  nlohmann::json attrs;
  std::string async_handle;  // *_start and dist.wait
  double predicted_start_s = -1;
  double predicted_duration_s = 0;
  // "phases.forward[12] (nn.linear)", for error messages.
  std::string where() const;
};

struct PlanInterface {
  int64_t ids = -1;
  int64_t labels = -1;
  int64_t loss_grad_seed = -1;
  int64_t loss = -1;
  int64_t positions = -1;  // optional: position ids 0..seq-1 per row (GPT-2)
  int64_t vocab = 0;       // optional: rows of the token embedding (0: unknown)
};

struct PredictedFigures {
  double step_time_s = 0;
  // FLOPs of the nn ops per rank and step (0: a plan from before the field).
  double model_flops = 0;
  // The planned device (topology.device): its name and dense peak FLOP/s.
  std::string device;
  double peak_flops_bf16 = 0;
  double peak_flops_fp32 = 0;
  double compute_s = 0;
  double exposed_comm_s = 0;
  int64_t peak_bytes = 0;
  std::map<std::string, int64_t> breakdown;  // bytes per role at the peak
};

// A one-rank mesh, the placeholder before a plan's mesh is read.
mesh::DeviceMesh singleRankMesh();

struct Plan {
  std::string source;  // the file it came from
  std::string model;
  std::string function;
  mesh::DeviceMesh mesh = singleRankMesh();
  std::vector<std::string> strategies;
  std::vector<BufferSpec> buffers;
  // Forward, then backward, then optimizer instructions, in execution order.
  std::vector<Instruction> instructions;
  PlanInterface interface;
  PredictedFigures predicted;
  int64_t worldSize() const { return mesh.size(); }
};

// Reads and checks a plan.json. Errors are InvalidArgument (NotFound for a
// missing file) and name the file and the JSON path of the offending field.
absl::StatusOr<Plan> loadPlan(const std::string& path);
absl::StatusOr<Plan> parsePlan(const nlohmann::json& json, std::string_view source);

// Checks the plan against the job that is about to run it.
absl::Status checkPlanForJob(const Plan& plan, int64_t world_size);

// Where this rank's local piece of `buffer` starts in the global tensor, per
// dim, and how many of its rows along each dim are real (not padding), for
// the rank at `coords` on the mesh.
struct ShardBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> valid;  // valid <= local extent
};
absl::StatusOr<ShardBox> shardBoxOf(const BufferSpec& buffer, const mesh::DeviceMesh& mesh,
                                    const std::vector<int64_t>& coords);

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_PLAN_PLAN_H_
