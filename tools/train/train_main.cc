// train: runs a plan.json on every rank of a job and trains the model.
//
//   bazel run //tools:train -- --plan=DIR/plan.json --steps=20 --nproc=4
//   launch --nproc=4 -- train --plan=... ; mpirun -n 4 train --backend=mpi ...
//
// Each rank finds its place from the launcher's environment (//tools:launch
// or torchrun, mpirun, srun); with --nproc and no launcher around it, the
// tool starts the ranks itself. With --device=cuda each rank trains on GPU
// LOCAL_RANK and its collectives run over NCCL. Rank 0 logs loss, tokens/s and step time,
// and at the end the measured memory per phase (and a pipeline's bubble per
// stage) beside the planner's prediction; --checkpoint_dir saves sharded
// checkpoints, --resume continues from the latest, --trace writes the
// merged measured trace.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "comm/all_backends.h"
#include "comm/hash_store.h"
#include "comm/join.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/checkpoint_writer.h"
#include "runtime/hf/hf_executor.h"
#include "runtime/kernels/ignore_label.h"
#include "runtime/data/token_feed.h"
#include "runtime/executor/cuda_kernel_set.h"
#include "runtime/executor/executor.h"
#include "runtime/optim/lr_schedule.h"
#include "plan/plan.h"
#include "plan/shard_box.h"
#include "tools/launch/launcher.h"
#include "runtime/kernels/cpu/blas_core.h"
#include "runtime/kernels/cpu/blas_threads.h"
#include "tools/launch/rank_env.h"
#include "tools/train/pipeline_bubbles.h"
#include "tools/train/step_metrics.h"
#include "tools/train/tfevents_writer.h"
#include "tools/train/train_report.h"
#include "tools/train/uneven_inputs.h"

ABSL_FLAG(std::string, plan, "", "the plan.json to run (from //tools:plan --out=DIR)");
ABSL_FLAG(int, steps, 10, "training steps to run (in all, counting resumed ones)");
ABSL_FLAG(int, nproc, 0, "start this many local ranks (when not under a launcher)");
ABSL_FLAG(std::string, device, "cpu",
          "where each rank computes: cpu, or cuda (GPU LOCAL_RANK; exits 3 with 'train: skipped: "
          "...' where no GPU is usable)");
ABSL_FLAG(
    std::string, backend, "",
    "communication backend: gloo (the default) or mpi with --device=cpu; with --device=cuda "
    "collectives move CUDA tensors, and that means nccl (the default there, the only choice)");
ABSL_FLAG(std::string, data, "synthetic",
          "synthetic, a token file (random windows), or epoch:FILE[,FILE...] (one pass over "
          "the files; docs/runtime_data.md)");
ABSL_FLAG(std::string, uneven_inputs, "even",
          "when --data=epoch: ends at different steps on different ranks: even (refuse), join "
          "(ranks out of data shadow the others' steps with zero gradients) or throw (stop "
          "every rank at the first step some rank has no data for)");
ABSL_FLAG(uint64_t, data_seed, 1234, "seed that picks each step's rows");
ABSL_FLAG(double, lr, 0, "AdamW learning rate (0: the plan's)");
ABSL_FLAG(int, lr_warmup_steps, 0,
          "linear warmup: step s of the first N runs at s/(N+1) of the rate (0: none)");
ABSL_FLAG(std::string, lr_decay, "constant",
          "after the warmup: constant, linear or cosine decay to --lr_min_ratio of the rate");
ABSL_FLAG(int, lr_decay_steps, 0,
          "the step the decay ends at, warmup included (0: --steps); the rate then stays at "
          "the floor");
ABSL_FLAG(double, lr_min_ratio, 0, "the decay's floor, as a fraction of the rate");
ABSL_FLAG(double, max_grad_norm, 0, "clip gradients to this global norm (0: off)");
ABSL_FLAG(int, timeout_s, 300, "bound on the rendezvous and on every collective");
ABSL_FLAG(std::string, checkpoint_dir, "", "save sharded checkpoints here");
ABSL_FLAG(int, save_every, 0, "save every N steps (0: only after the last step)");
ABSL_FLAG(bool, resume, false, "continue from the latest checkpoint in --checkpoint_dir");
ABSL_FLAG(std::string, init_from_hf, "",
          "start from Hugging Face weights: a .safetensors file, an index or a directory "
          "(docs/runtime_hf.md)");
ABSL_FLAG(std::string, export_hf, "", "after the last step, write the weights here as safetensors");
ABSL_FLAG(std::string, trace, "", "write the measured trace (Chrome/Perfetto JSON) here");
ABSL_FLAG(std::string, losses_out, "", "write {\"losses\": [...]} (rank 0) here");
ABSL_FLAG(std::string, metrics_out, "",
          "append one JSON line per step here (rank 0): loss, lr, throughput, memory, "
          "communication, eval loss (docs/runtime.md, \"Metrics log\")");
ABSL_FLAG(int, eval_every, 0,
          "evaluate every N steps and after the last (0: never): the mean loss of "
          "--eval_batches fixed batches of --eval_data, forward only");
ABSL_FLAG(std::string, eval_data, "",
          "the held-out data --eval_every reads: a token file kept apart from --data, or "
          "synthetic (docs/runtime.md, \"Evaluation\")");
ABSL_FLAG(int, eval_batches, 4, "batches (of the training step's shape) per evaluation");
ABSL_FLAG(std::string, tensorboard_dir, "",
          "write TensorBoard scalars (rank 0) to DIR/events.out.tfevents.*");
ABSL_FLAG(std::string, report_dir, "",
          "write DIR/train_report.html (rank 0): loss, eval, learning rate, throughput, the "
          "measured step beside the predicted one (with --trace) and memory against the plan");
ABSL_FLAG(std::string, memory_out, "", "write measured and predicted memory (JSON) here");
ABSL_FLAG(bool, progress, true, "draw a progress bar on a terminal");
ABSL_FLAG(int, blas_threads, 0,
          "OpenBLAS threads per rank with --device=cpu (0: OPENBLAS_NUM_THREADS or OMP_NUM_THREADS "
          "when set, else the cores shared among the ranks on this machine)");
ABSL_FLAG(bool, overlap, true,
          "run collectives async as the plan schedules them; false waits for each at once "
          "(no prefetch), for comparison");
ABSL_FLAG(std::string, comm_checks, "cheap",
          "collective checks across ranks: off, cheap (op, seq, dtype, count) or detail "
          "(+ shapes); LOOM_COMM_CHECKS overrides");
ABSL_FLAG(bool, deterministic, false,
          "fix every reduction order so batch-split layouts match the 1-rank run bit for bit "
          "(slower; docs/runtime.md)");
ABSL_FLAG(std::string, dump_dir, "",
          "write every step's gradients (DIR/grads) and parameters (DIR/params) as checkpoints, "
          "for //tools:parity");
ABSL_FLAG(int, fault_kill_rank, -1, "fault injection: this rank SIGKILLs itself ...");
ABSL_FLAG(int, fault_kill_at_step, 0, "... right after finishing this step (tests crash recovery)");
ABSL_FLAG(int, fault_kill_in_save, 0,
          "... or in the middle of writing its shards of this step's checkpoint");

namespace loom::train {
namespace {

using nlohmann::json;

// Whether some launcher already made this process a rank.
bool underLauncher() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

// Set by train --nproc for the ranks it starts: the header's "via" names it
// instead of the torchrun-style variables it hands them.
constexpr char kLauncherEnv[] = "LOOM_TRAIN_LAUNCHER";

// --nproc without a launcher: start the ranks as children running this
// same binary with the same flags; they see RANK and so become ranks.
int runAsLauncher(int argc, char** argv, int nproc) {
  launch::LaunchOptions options;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "train: cannot find its own binary to start ranks\n");
    return 2;
  }
  self[n] = '\0';
  options.binary = self;
  for (int i = 1; i < argc; ++i) options.args.push_back(argv[i]);
  // The ranks see torchrun's variables; this names who really started them.
  setenv(kLauncherEnv, "train --nproc", 1);
  options.nproc = nproc;
  options.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s)) * 4;
  absl::StatusOr<launch::LaunchResult> result = launch::runLocalJob(options);
  if (!result.ok()) {
    std::fprintf(stderr, "train: %s\n", std::string(result.status().message()).c_str());
    return 2;
  }
  if (!result->message.empty()) std::fprintf(stderr, "train: %s\n", result->message.c_str());
  return result->exit_code;
}

// --backend, or the device's default.
std::string backendName() {
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (!backend.empty()) return backend;
  return absl::GetFlag(FLAGS_device) == "cuda" ? "nccl" : "gloo";
}

// This process's GPU: its local rank under a launcher, else 0.
int localGpu() {
  if (!underLauncher()) return 0;
  absl::StatusOr<launch::RankEnv> env = launch::detectRankEnv();
  return env.ok() ? env->local_rank : 0;
}

struct Job {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<comm::Store> store;
  std::shared_ptr<comm::ProcessGroup> world;
  std::string source = "single process";
  int local_ranks = 1;  // ranks on this machine
};

absl::StatusOr<Job> joinJob(absl::Duration timeout) {
  Job job;
  comm::registerAllBackends();
  if (underLauncher()) {
    absl::StatusOr<launch::RankEnv> env = launch::detectRankEnv();
    if (!env.ok()) return env.status();
    comm::RendezvousOptions rdv;
    rdv.timeout = timeout;
    rdv.getenv = launch::rendezvousEnv(*env);
    absl::StatusOr<comm::RendezvousResult> r = comm::rendezvous("env://", rdv);
    if (!r.ok()) return r.status();
    job.rank = r->rank;
    job.world_size = r->world_size;
    job.store = r->store;
    const char* launcher = std::getenv(kLauncherEnv);
    job.source = launcher != nullptr ? std::string(launcher)
                                     : std::string(launch::rankEnvSourceName(env->source));
    job.local_ranks = env->local_world_size;
  } else {
    job.store = std::make_shared<comm::HashStore>();
  }
  comm::ProcessGroupOptions options;
  const std::string backend = backendName();
  if (absl::GetFlag(FLAGS_device) == "cuda") {
    if (backend != "nccl") {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend=", backend,
                       " with --device=cuda: CUDA tensors go over nccl; leave --backend "
                       "out or pass --backend=nccl"));
    }
    // Gloo carries the host-side exchanges (memory table, trace, barrier).
    options.cpu_backend = "gloo";
    options.cuda_backend = "nccl";
  } else {
    if (backend != "gloo" && backend != "mpi") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backend=", backend, " with --device=cpu: use gloo or mpi (nccl needs --device=cuda)"));
    }
    options.cpu_backend = backend;
  }
  options.timeout = timeout;
  options.group_name = "train";
  const std::string checks = absl::GetFlag(FLAGS_comm_checks);
  if (checks == "off") {
    options.checks = comm::CollectiveChecks::kOff;
  } else if (checks == "cheap") {
    options.checks = comm::CollectiveChecks::kCheap;
  } else if (checks == "detail") {
    options.checks = comm::CollectiveChecks::kDetail;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--comm_checks=", checks, " is not one of off, cheap, detail"));
  }
  absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> world =
      comm::ProcessGroup::create(job.store, job.rank, job.world_size, options);
  if (!world.ok()) return world.status();
  job.world = *world;
  return job;
}

absl::StatusOr<std::unique_ptr<runtime::data::DataFeed>> openFeed(const runtime::Executor& e,
                                                                  const std::string& data) {
  return runtime::data::openDataFeed(data, {.seed = absl::GetFlag(FLAGS_data_seed),
                                            .vocab = e.vocab(),
                                            .seq = e.seqLength(),
                                            .global_batch = e.stepBatch()});
}

// This rank's rows of the step batch, one range per micro-batch.
std::vector<runtime::data::RowRange> stepRows(const runtime::Executor& e) {
  std::vector<runtime::data::RowRange> rows;
  for (int64_t m = 0; m < e.microBatches(); ++m) rows.push_back(e.microBatchRows(m));
  return rows;
}

// This rank's rows of step `step` of `feed`, micro-batch after micro-batch,
// as Executor::step and evaluate take them; with `shadow`, a joined rank's
// batch instead: ids 0, every label ignored.
absl::Status fillBatch(const runtime::Executor& e, const runtime::data::DataFeed& feed,
                       int64_t step, std::vector<int32_t>& ids, std::vector<int32_t>& labels,
                       bool shadow = false) {
  const int64_t microTokens = e.batchRows().count * e.seqLength();
  ids.resize(e.microBatches() * microTokens);
  labels.resize(ids.size());
  if (shadow) {
    std::fill(ids.begin(), ids.end(), 0);
    std::fill(labels.begin(), labels.end(), runtime::kIgnoreLabel);
    return absl::OkStatus();
  }
  for (int64_t m = 0; m < e.microBatches(); ++m) {
    const runtime::data::RowRange micro = e.microBatchRows(m);
    if (absl::Status s = feed.batch(step, micro.begin, micro.count, ids.data() + m * microTokens,
                                    labels.data() + m * microTokens);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// --eval_every: batches 1..K of the held-out feed, the same at every
// evaluation, so that the figures compare across steps.
struct Evaluation {
  int every = 0;
  int batches = 0;
  std::unique_ptr<runtime::data::DataFeed> feed;
  bool due(int64_t step, int64_t last) const {
    return every > 0 && (step % every == 0 || step == last);
  }
};

absl::StatusOr<Evaluation> openEvaluation(const runtime::Executor& e) {
  Evaluation eval;
  eval.every = absl::GetFlag(FLAGS_eval_every);
  eval.batches = absl::GetFlag(FLAGS_eval_batches);
  if (eval.every < 0) return absl::InvalidArgumentError("--eval_every must be >= 0");
  if (eval.every == 0) return eval;
  if (eval.batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--eval_batches=", eval.batches, ": evaluate at least one batch"));
  }
  const std::string data = absl::GetFlag(FLAGS_eval_data);
  if (data.empty()) {
    return absl::InvalidArgumentError(
        "--eval_every needs --eval_data: a token file held out from --data (or synthetic)");
  }
  if (data != "synthetic" && data == absl::GetFlag(FLAGS_data)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eval_data=", data, " is the training file; evaluate on a held-out token file"));
  }
  absl::StatusOr<std::unique_ptr<runtime::data::DataFeed>> feed = openFeed(e, data);
  if (!feed.ok()) {
    return absl::Status(feed.status().code(),
                        absl::StrCat("--eval_data: ", feed.status().message()));
  }
  eval.feed = *std::move(feed);
  return eval;
}

// The mean held-out loss and the seconds it took.
absl::StatusOr<runtime::EvalResult> evaluate(runtime::Executor& e, const Evaluation& eval,
                                             int64_t after_step) {
  std::vector<int32_t> ids, labels;
  runtime::EvalResult total;
  for (int k = 1; k <= eval.batches; ++k) {
    if (absl::Status s = fillBatch(e, *eval.feed, k, ids, labels); !s.ok()) return s;
    absl::StatusOr<runtime::EvalResult> r = e.evaluate(after_step, ids.data(), labels.data());
    if (!r.ok()) return r.status();
    total.loss += r->loss / eval.batches;
    total.seconds += r->seconds;
  }
  return total;
}

// "[#########.........]" for a terminal, rewritten in place.
void drawProgress(int step, int steps, double loss) {
  constexpr int kWidth = 30;
  const int filled = steps ? step * kWidth / steps : kWidth;
  std::fprintf(stderr, "\r[%s%s] %d/%d loss %.4f", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), step, steps, loss);
  if (step == steps) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// Model FLOPs utilisation: the plan's nn FLOPs per rank over the median
// step, against the planned device's dense peak for the params' dtype
// (bf16 for a mixed-precision plan).
void printMfu(const plan::Plan& plan, double step_seconds) {
  const plan::Predicted& p = plan.predicted;
  bool bf16 = false;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.role == plan::BufferRole::kParam) bf16 |= b.dtype != comm::DType::kFloat32;
  }
  const double peak = bf16 ? plan.topology.peak_flops_bf16 : plan.topology.peak_flops_fp32;
  if (p.model_flops <= 0 || peak <= 0 || step_seconds <= 0) return;
  const double achieved = p.model_flops / step_seconds;
  // Significant digits, not decimals: a CPU rank's few GFLOP/s would print
  // as 0.0 TFLOP/s.
  std::printf(
      "MFU %.3g%%: %.3g model FLOPs per rank per step, %.4g TFLOP/s per rank against the plan's %s "
      "%s peak of %.4g TFLOP/s\n",
      100.0 * achieved / peak, p.model_flops, achieved / 1e12, plan.topology.device.c_str(),
      bf16 ? "bf16" : "fp32", peak / 1e12);
}

// Rank 0's table of every rank's peak bytes per phase (`all`: rank-major,
// phase-minor) beside the planner's peak for that rank (`planned`: a
// pipeline stage's own); returns its rows.
json memoryTable(const std::string& title, const std::vector<std::string>& phases,
                 const std::vector<int64_t>& all, const std::vector<int64_t>& planned) {
  std::printf("\n%s\n", title.c_str());
  std::printf("| rank | forward | backward | optimizer | checkpoint | eval | peak | vs plan |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  json ranks = json::array();
  for (size_t r = 0; r < planned.size(); ++r) {
    int64_t peak = 0;
    json rank = {{"rank", r}, {"predicted_peak_bytes", planned[r]}};
    for (size_t i = 0; i < phases.size(); ++i) {
      peak = std::max(peak, all[r * phases.size() + i]);
      rank[phases[i]] = all[r * phases.size() + i];
    }
    rank["peak"] = peak;
    // Positive when the run took more than the planner said.
    const double diff =
        planned[r] ? 100.0 * (static_cast<double>(peak) - planned[r]) / planned[r] : 0;
    std::printf("| %zu |", r);
    for (size_t i = 0; i < phases.size(); ++i) {
      std::printf(" %lld |", static_cast<long long>(all[r * phases.size() + i]));
    }
    std::printf(" %lld | %+.1f %% |\n", static_cast<long long>(peak), diff);
    ranks.push_back(rank);
  }
  return ranks;
}

// Every rank's device peak as planned: its pipeline stage's, or the plan's.
absl::StatusOr<std::vector<int64_t>> plannedPeaks(const plan::Plan& plan, int world) {
  const std::vector<int64_t>& stagePeaks = plan.predicted.stage_peak_bytes;
  std::vector<int64_t> planned(world, plan.predicted.peak_bytes);
  if (stagePeaks.empty()) return planned;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<std::vector<int64_t>> coords = plan.mesh.coordinateOf(r);
    if (!coords.ok()) return coords.status();
    planned[r] = stagePeaks[&plan::programFor(plan, *coords) - plan.programs.data()];
  }
  return planned;
}

// Every rank's peak bytes per phase, gathered; rank 0 prints them beside the
// planner's prediction and returns them as JSON. A plan with host buffers
// (offload) gets the host arena's peaks in a table of their own.
absl::StatusOr<json> memoryReport(runtime::Executor& e, comm::ProcessGroup& world,
                                  bool deterministic) {
  const std::vector<std::string> phases = {"forward", "backward", "optimizer", "checkpoint",
                                           "eval"};
  const size_t n = phases.size();
  // Device peaks, then host peaks.
  std::vector<int64_t> mine(2 * n, 0);
  for (const runtime::PhaseMemory& m : e.phaseMemory()) {
    for (size_t i = 0; i < n; ++i) {
      if (phases[i] != m.phase) continue;
      mine[i] = std::max(mine[i], m.peak_bytes);
      mine[n + i] = std::max(mine[n + i], m.host_peak_bytes);
    }
  }
  std::vector<int64_t> all(mine.size() * world.size());
  absl::StatusOr<std::shared_ptr<comm::Work>> work = world.allGatherIntoTensor(
      comm::Tensor(all.data(), comm::DType::kInt64, {static_cast<int64_t>(all.size())}),
      comm::Tensor(mine.data(), comm::DType::kInt64, {static_cast<int64_t>(mine.size())}));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(); !s.ok()) return s;
  const plan::Predicted& predicted = e.plan().predicted;
  json report = {{"predicted_peak_bytes", predicted.peak_bytes}, {"ranks", json::array()}};
  if (!predicted.stage_peak_bytes.empty()) {
    report["predicted_stage_peak_bytes"] = predicted.stage_peak_bytes;
  }
  if (predicted.offload) report["predicted_host_peak_bytes"] = predicted.offload->host_peak_bytes;
  if (world.rank() != 0) return report;
  std::vector<int64_t> device, host;
  for (int r = 0; r < world.size(); ++r) {
    const auto rank = all.begin() + static_cast<int64_t>(r * 2 * n);
    device.insert(device.end(), rank, rank + static_cast<int64_t>(n));
    host.insert(host.end(), rank + static_cast<int64_t>(n), rank + static_cast<int64_t>(2 * n));
  }
  absl::StatusOr<std::vector<int64_t>> planned = plannedPeaks(e.plan(), world.size());
  if (!planned.ok()) return planned.status();
  // Deterministic mode's per-row partial sums are the runtime's, not the
  // plan's: the table says so rather than compare them silently.
  report["ranks"] = memoryTable(
      absl::StrFormat(
          "memory per rank (bytes handed out by the caching allocator; planner: %lld%s%s)",
          static_cast<long long>(predicted.peak_bytes),
          predicted.stage_peak_bytes.empty()
              ? ""
              : " at the fullest stage, each rank against its own stage's",
          deterministic ? "; --deterministic adds per-row partial sums the plan leaves out" : ""),
      phases, device, *planned);
  if (predicted.offload) {
    report["host_ranks"] = memoryTable(
        absl::StrFormat("host memory per rank (bytes handed out by the host arena: offloaded "
                        "states and gradients; planner: %lld)",
                        static_cast<long long>(predicted.offload->host_peak_bytes)),
        phases, host,
        std::vector<int64_t>(world.size(), predicted.offload->host_peak_bytes));
  }
  return report;
}

// The step's figures for the metrics log and TensorBoard (rank 0's).
StepMetrics stepMetrics(const runtime::Executor& e, int64_t step, const runtime::StepResult& r,
                        int64_t global_tokens, const runtime::ExecutorOptions& options) {
  StepMetrics m;
  m.step = step;
  m.loss = r.loss;
  m.lr = r.learning_rate;
  m.tokens_per_s = global_tokens / r.seconds;
  m.step_s = r.seconds;
  m.reserved_bytes = e.allocatorStats().reserved_bytes;
  m.comm_bytes = r.comm_bytes;
  if (options.max_grad_norm > 0) m.grad_norm = r.grad_norm;
  // A GPU's waits are stream waits: the host's blocked time is not the
  // exposed communication there, so the field is left out.
  if (options.device == runtime::ExecutorDevice::kCpu) {
    m.exposed_comm_s = r.comm_wait_seconds;
    if (e.plan().programs.size() > 1) m.bubble_s = r.bubble_seconds;
  }
  for (const runtime::PhaseMemory& p : e.phaseMemory()) {
    m.peak_bytes = std::max(m.peak_bytes, p.peak_bytes);
    int64_t& phase = m.phase_peak_bytes[p.phase];
    phase = std::max(phase, p.peak_bytes);
  }
  return m;
}

absl::Status writeJson(const std::string& path, const json& value) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << value.dump(1) << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

// DIR/train_report.html, through a temporary file and a rename.
absl::Status writeReport(const std::string& dir, const ReportInput& report) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create --report_dir '", dir, "': ", std::strerror(errno)));
  }
  const std::string path = dir + "/train_report.html";
  {
    std::ofstream out(path + ".tmp");
    out << renderTrainReport(report);
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path, ".tmp"));
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", path, ".tmp to ", path));
  }
  std::printf("report: %s\n", path.c_str());
  return absl::OkStatus();
}

// Sets this rank's OpenBLAS threads (--device=cpu) and says how many and why.
std::string setUpBlas(const Job& job) {
  if (absl::GetFlag(FLAGS_device) != "cpu") return "n/a";
  const runtime::cpu::BlasThreads threads = runtime::cpu::chooseBlasThreads(
      absl::GetFlag(FLAGS_blas_threads), job.local_ranks, runtime::cpu::usableCores(),
      [](const char* name) -> std::optional<std::string> {
        const char* value = std::getenv(name);
        return value == nullptr ? std::nullopt : std::optional<std::string>(value);
      });
  if (threads.threads > 0) runtime::cpu::setBlasThreads(threads.threads);
  return absl::StrCat(runtime::cpu::blasThreads(), " (", threads.why, "), OpenBLAS core ",
                      runtime::cpu::blasCoreName());
}

// The executor's options from the flags (the parity dumps' callback aside).
absl::StatusOr<runtime::ExecutorOptions> executorOptions(absl::Duration timeout) {
  runtime::ExecutorOptions options;
  options.timeout = timeout;
  options.learning_rate = absl::GetFlag(FLAGS_lr);
  absl::StatusOr<runtime::optim::LrDecay> decay =
      runtime::optim::parseLrDecay(absl::GetFlag(FLAGS_lr_decay));
  if (!decay.ok()) return decay.status();
  options.lr_schedule = {.warmup_steps = absl::GetFlag(FLAGS_lr_warmup_steps),
                         .decay = *decay,
                         .decay_end_step = absl::GetFlag(FLAGS_lr_decay_steps) > 0
                                               ? absl::GetFlag(FLAGS_lr_decay_steps)
                                               : absl::GetFlag(FLAGS_steps),
                         .min_ratio = absl::GetFlag(FLAGS_lr_min_ratio)};
  if (absl::Status s = runtime::optim::checkLrSchedule(options.lr_schedule); !s.ok()) return s;
  options.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  options.trace = !absl::GetFlag(FLAGS_trace).empty();
  options.overlap = absl::GetFlag(FLAGS_overlap);
  options.deterministic = absl::GetFlag(FLAGS_deterministic);
  if (absl::GetFlag(FLAGS_device) == "cuda") {
    options.device = runtime::ExecutorDevice::kCuda;
    options.cuda_device = localGpu();
  }
  return options;
}

// --resume: loads the latest checkpoint of `checkpoint_dir`; the first step
// to run (1 without --resume).
absl::StatusOr<int64_t> resumeIfAsked(runtime::Executor& e, const std::string& checkpoint_dir,
                                      bool lead) {
  if (!absl::GetFlag(FLAGS_resume)) return 1;
  if (checkpoint_dir.empty()) return absl::InvalidArgumentError("--resume needs --checkpoint_dir");
  absl::StatusOr<runtime::checkpoint::CheckpointReader> reader =
      runtime::checkpoint::CheckpointReader::open(checkpoint_dir);
  if (!reader.ok()) return reader.status();
  if (absl::Status s = e.loadCheckpoint(*reader); !s.ok()) return s;
  if (lead) {
    std::printf("resumed from %s (step %lld, saved by %lld ranks on mesh %s)\n",
                reader->directory().c_str(), static_cast<long long>(reader->step()),
                static_cast<long long>(reader->worldSize()), reader->mesh().c_str());
  }
  return reader->step() + 1;
}

// --init_from_hf: the parameters from Hugging Face safetensors, each rank
// reading its own shards (docs/runtime_hf.md).
absl::Status initFromHfIfAsked(runtime::Executor& e, bool lead) {
  const std::string hf = absl::GetFlag(FLAGS_init_from_hf);
  if (hf.empty()) return absl::OkStatus();
  if (absl::GetFlag(FLAGS_resume)) {
    return absl::InvalidArgumentError("--init_from_hf and --resume both set the weights; pass one");
  }
  absl::StatusOr<runtime::hf::LoadReport> loaded = runtime::hf::loadHfWeights(e, hf);
  if (!loaded.ok()) return loaded.status();
  if (lead) {
    std::printf("loaded %lld parameters from %s (rank 0 read %lld bytes)\n",
                static_cast<long long>(loaded->tensors), loaded->source.c_str(),
                static_cast<long long>(loaded->bytes_read));
  }
  return absl::OkStatus();
}

// Rank 0, before the first step: makes the directories the output files
// go in, so that a missing one is made (or refused) now rather than after
// the run.
absl::Status makeOutputDirs() {
  for (const auto& [flag, path] : {std::pair{"--trace", absl::GetFlag(FLAGS_trace)},
                                   std::pair{"--losses_out", absl::GetFlag(FLAGS_losses_out)},
                                   std::pair{"--metrics_out", absl::GetFlag(FLAGS_metrics_out)},
                                   std::pair{"--memory_out", absl::GetFlag(FLAGS_memory_out)}}) {
    if (path.empty()) continue;
    const std::filesystem::path file(path);
    std::error_code error;
    if (std::filesystem::is_directory(file, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", path, " is a directory; name a file in it"));
    }
    if (!file.has_parent_path()) continue;
    std::filesystem::create_directories(file.parent_path(), error);
    if (error) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create the directory of ", flag, "=", path, ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

// Rank 0: writes the merged trace to --trace and prints its communication
// table and stragglers.
absl::Status writeTrace(const json& trace) {
  if (absl::Status s = writeJson(absl::GetFlag(FLAGS_trace), trace); !s.ok()) return s;
  const json& summary = trace["loomSummary"];
  std::printf("\nmeasured communication per rank (trace: %s)\n",
              absl::GetFlag(FLAGS_trace).c_str());
  std::printf(
      "| collective | axes | count | comm ms | exposed ms |\n| --- | --- | ---: | ---: | ---: |\n");
  for (const json& c : summary["collectives"]) {
    std::printf("| %s | %s | %lld | %.2f | %.2f |\n", c["kind"].get<std::string>().c_str(),
                c["axes"].get<std::string>().c_str(), c["count_per_rank"].get<long long>(),
                c["comm_ms_per_rank"].get<double>(), c["exposed_ms_per_rank"].get<double>());
  }
  for (const json& s : summary["stragglers"]) {
    std::printf("rank %d issued last in %lld collectives (mean lateness %.0f us)\n",
                s["rank"].get<int>(), s["times_last"].get<long long>(),
                s["mean_lateness_us"].get<double>());
  }
  return absl::OkStatus();
}

absl::Status train() {
  const std::string planPath = absl::GetFlag(FLAGS_plan);
  if (planPath.empty()) {
    return absl::InvalidArgumentError(
        "--plan is required: make one with bazel run //tools:plan -- --out=DIR ..., then pass "
        "--plan=DIR/plan.json");
  }
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath);
  if (!plan.ok()) return plan.status();
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  absl::StatusOr<Job> job = joinJob(timeout);
  if (!job.ok()) return job.status();
  const bool lead = job->rank == 0;
  if (lead) {
    if (absl::Status s = makeOutputDirs(); !s.ok()) return s;
  }
  const std::string blas = setUpBlas(*job);

  absl::StatusOr<runtime::ExecutorOptions> madeOptions = executorOptions(timeout);
  if (!madeOptions.ok()) return madeOptions.status();
  runtime::ExecutorOptions options = *std::move(madeOptions);
  const bool scheduled = options.lr_schedule.warmup_steps > 0 ||
                         options.lr_schedule.decay != runtime::optim::LrDecay::kConstant;
  const std::string dumpDir = absl::GetFlag(FLAGS_dump_dir);
  std::optional<runtime::checkpoint::CheckpointWriter> gradDump, paramDump;
  absl::Status dumpStatus;
  if (!dumpDir.empty()) {
    gradDump.emplace(dumpDir + "/grads", runtime::checkpoint::WriterOptions{
                                             .mesh = plan->mesh.toString(), .progress = {}});
    paramDump.emplace(dumpDir + "/params", runtime::checkpoint::WriterOptions{
                                               .mesh = plan->mesh.toString(), .progress = {}});
    options.on_gradients = [&](int64_t step,
                               const std::vector<runtime::checkpoint::ShardView>& grads) {
      if (!dumpStatus.ok()) return;
      dumpStatus = gradDump->save(step, grads, {{"step", step}}, *job->store, job->rank,
                                  job->world_size, timeout);
    };
  }
  absl::StatusOr<std::unique_ptr<runtime::Executor>> executor =
      runtime::Executor::create(*plan, job->world, options);
  if (!executor.ok()) return executor.status();
  runtime::Executor& e = **executor;
  absl::StatusOr<std::unique_ptr<runtime::data::DataFeed>> feed =
      openFeed(e, absl::GetFlag(FLAGS_data));
  if (!feed.ok()) return feed.status();
  absl::StatusOr<Evaluation> eval = openEvaluation(e);
  if (!eval.ok()) return eval.status();

  const std::string checkpointDir = absl::GetFlag(FLAGS_checkpoint_dir);
  absl::StatusOr<int64_t> resumed = resumeIfAsked(e, checkpointDir, lead);
  if (!resumed.ok()) return resumed.status();
  const int64_t firstStep = *resumed;
  if (absl::Status s = initFromHfIfAsked(e, lead); !s.ok()) return s;
  std::optional<runtime::checkpoint::CheckpointWriter> writer;
  int64_t savingStep = 0;
  if (!checkpointDir.empty()) {
    runtime::checkpoint::ProgressFn progress;
    if (job->rank == absl::GetFlag(FLAGS_fault_kill_rank) &&
        absl::GetFlag(FLAGS_fault_kill_in_save) > 0) {
      // Fault injection: die once some, not all, of this rank's bytes are
      // written, so the step's files are torn.
      progress = [&savingStep, rank = job->rank](int64_t done, int64_t total) {
        if (savingStep == absl::GetFlag(FLAGS_fault_kill_in_save) && done > 0 && done <= total) {
          std::fprintf(stderr,
                       "train: fault injection: rank %d kills itself while saving step %lld\n",
                       rank, static_cast<long long>(savingStep));
          std::fflush(stderr);
          kill(getpid(), SIGKILL);
        }
      };
    }
    writer.emplace(checkpointDir, runtime::checkpoint::WriterOptions{.mesh = plan->mesh.toString(),
                                                                     .progress = progress});
  }

  const int steps = absl::GetFlag(FLAGS_steps);
  const int saveEvery = absl::GetFlag(FLAGS_save_every);
  const bool bar = lead && absl::GetFlag(FLAGS_progress) && isatty(STDERR_FILENO);
  const int64_t globalTokens = e.stepBatch() * e.seqLength();
  std::vector<int32_t> ids, labels;
  if (lead) {
    std::printf(
        "train: %s on mesh %s (%s), %d ranks via %s, device %s, backend %s, %lld tokens per step, "
        "BLAS threads per rank %s\n",
        plan->model.c_str(), plan->mesh.toString().c_str(),
        absl::StrJoin(plan->strategies, ",").c_str(), job->world_size, job->source.c_str(),
        absl::GetFlag(FLAGS_device).c_str(), backendName().c_str(),
        static_cast<long long>(globalTokens), blas.c_str());
  }
  json losses = json::array();
  std::vector<double> stepSeconds, bubbleSeconds;
  // The metrics log: appended, so that a resumed run continues the file.
  std::FILE* metrics = nullptr;
  if (lead && !absl::GetFlag(FLAGS_metrics_out).empty()) {
    metrics = std::fopen(absl::GetFlag(FLAGS_metrics_out).c_str(), "a");
    if (metrics == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("cannot open --metrics_out '",
                                                     absl::GetFlag(FLAGS_metrics_out),
                                                     "' for appending: ", std::strerror(errno)));
    }
  }
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::unique_ptr<std::FILE, CloseFile> metricsFile(metrics);
  std::unique_ptr<TfEventsWriter> tensorboard;
  if (lead && !absl::GetFlag(FLAGS_tensorboard_dir).empty()) {
    absl::StatusOr<std::unique_ptr<TfEventsWriter>> w =
        TfEventsWriter::create(absl::GetFlag(FLAGS_tensorboard_dir));
    if (!w.ok()) return w.status();
    tensorboard = *std::move(w);
  }
  json evalLosses = json::array();
  std::vector<StepMetrics> history;  // for the report
  // One step: a rank with data trains on it; a joined rank (`shadow`, under
  // --uneven_inputs=join) runs the same step on ignored labels, so that its
  // collectives match the others' and it adds nothing to the gradients.
  const comm::Join* join = nullptr;
  int64_t lastSaved = 0;
  auto save = [&](int64_t step) -> absl::Status {
    lastSaved = step;
    e.beginPhase("checkpoint");
    savingStep = step;
    absl::StatusOr<std::vector<runtime::checkpoint::ShardView>> shards = e.checkpointShards();
    if (!shards.ok()) return shards.status();
    absl::Status saved = writer->save(step, *shards,
                                      {{"step", step},
                                       {"optimizer_step", step},
                                       {"data_step", step + 1},
                                       {"model", plan->model},
                                       {"data_seed", absl::GetFlag(FLAGS_data_seed)}},
                                      *job->store, job->rank, job->world_size, timeout);
    e.endPhase();
    if (!saved.ok()) return saved;
    if (lead)
      std::printf("saved step %lld to %s\n", static_cast<long long>(step), checkpointDir.c_str());
    return absl::OkStatus();
  };
  auto runStep = [&](int64_t step, bool shadow) -> absl::Status {
    if (absl::Status s = fillBatch(e, **feed, step, ids, labels, shadow); !s.ok()) return s;
    absl::StatusOr<runtime::StepResult> result = e.step(step, ids.data(), labels.data());
    if (!result.ok()) return result.status();
    losses.push_back(result->loss);
    stepSeconds.push_back(result->seconds);
    bubbleSeconds.push_back(result->bubble_seconds);
    if (paramDump) {
      if (!dumpStatus.ok()) return dumpStatus;
      absl::StatusOr<std::vector<runtime::checkpoint::ShardView>> shards = e.checkpointShards();
      if (!shards.ok()) return shards.status();
      if (absl::Status s = paramDump->save(step, *shards, {{"step", step}, {"loss", result->loss}},
                                           *job->store, job->rank, job->world_size, timeout);
          !s.ok()) {
        return s;
      }
    }
    StepMetrics m = stepMetrics(e, step, *result, globalTokens, options);
    if (join != nullptr && join->activeRanks() < job->world_size) {
      m.ranks_with_data = join->activeRanks();
    }
    // After the step's figures are taken: evaluation is a phase of its own.
    if (eval->due(step, steps)) {
      absl::StatusOr<runtime::EvalResult> r = evaluate(e, *eval, step);
      if (!r.ok()) return r.status();
      m.eval_loss = r->loss;
      m.eval_s = r->seconds;
      for (const runtime::PhaseMemory& p : e.phaseMemory()) {
        if (p.phase == "eval") m.phase_peak_bytes["eval"] = p.peak_bytes;
      }
      evalLosses.push_back({{"step", step}, {"loss", r->loss}});
    }
    if (lead) history.push_back(m);
    if (metrics != nullptr) {
      std::fprintf(metrics, "%s\n", toJson(m).dump().c_str());
      std::fflush(metrics);
    }
    if (tensorboard) {
      if (absl::Status s = tensorboard->write(step, toScalars(m)); !s.ok()) return s;
    }
    if (lead) {
      std::printf("step %lld/%d loss %.6f tokens/s %.0f step %.1f ms%s%s%s%s\n",
                  static_cast<long long>(step), steps, result->loss, globalTokens / result->seconds,
                  result->seconds * 1e3,
                  options.max_grad_norm > 0
                      ? absl::StrFormat(" grad_norm %.4f", result->grad_norm).c_str()
                      : "",
                  scheduled ? absl::StrFormat(" lr %.4g", result->learning_rate).c_str() : "",
                  m.eval_loss ? absl::StrFormat(" eval_loss %.6f", *m.eval_loss).c_str() : "",
                  m.ranks_with_data
                      ? absl::StrFormat(" (%lld of %d ranks had data)",
                                        static_cast<long long>(*m.ranks_with_data), job->world_size)
                            .c_str()
                      : "");
      std::fflush(stdout);
      if (bar) drawProgress(static_cast<int>(step), steps, result->loss);
    }
    if (job->rank == absl::GetFlag(FLAGS_fault_kill_rank) &&
        step == absl::GetFlag(FLAGS_fault_kill_at_step)) {
      std::fprintf(stderr, "train: fault injection: rank %d kills itself after step %lld\n",
                   job->rank, static_cast<long long>(step));
      std::fflush(stderr);
      kill(getpid(), SIGKILL);
    }
    if (writer && (step == steps || (saveEvery > 0 && step % saveEvery == 0))) return save(step);
    return absl::OkStatus();
  };

  // The steps: while this rank has data, it notifies the Join (a no-op under
  // --uneven_inputs=even) and trains; then, joined, it shadows the others'
  // steps until every rank is out of data or at --steps.
  absl::StatusOr<UnevenInputs> uneven = parseUnevenInputs(absl::GetFlag(FLAGS_uneven_inputs));
  if (!uneven.ok()) return uneven.status();
  const int64_t lastWithData = lastStepWithInputs(**feed, stepRows(e), firstStep, steps);
  if (*uneven == UnevenInputs::kEven && (*feed)->finite()) {
    if (absl::Status s = checkEvenInputs(*job->world, lastWithData, timeout); !s.ok()) return s;
  }
  if (lead && lastWithData < steps) {
    std::printf("data: rank 0's data ends after step %lld of --steps=%d\n",
                static_cast<long long>(lastWithData), steps);
  }
  int64_t step = firstStep;
  ShadowSteps shadow(*job->world, [&] { return runStep(step++, /*shadow=*/true); });
  comm::Join joiner({&shadow}, {.enable = *uneven != UnevenInputs::kEven,
                                .throw_on_early_termination = *uneven == UnevenInputs::kThrow});
  join = &joiner;
  for (; step <= lastWithData; ++step) {
    if (absl::Status s = joiner.notify(); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
    }
    if (absl::Status s = runStep(step, /*shadow=*/false); !s.ok()) return s;
  }
  if (absl::Status s = joiner.join(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("step ", step, ": ", s.message()));
  }
  // Every rank took the same steps; when the data ended before --steps, the
  // last one is saved here.
  if (writer && step - 1 >= firstStep && lastSaved != step - 1) {
    if (absl::Status s = save(step - 1); !s.ok()) return s;
  }

  if (const std::string dir = absl::GetFlag(FLAGS_export_hf); !dir.empty()) {
    if (absl::Status s = runtime::hf::exportHfWeights(e, *job->store, job->world_size,
                                                      {.dir = dir, .timeout = timeout});
        !s.ok()) {
      return s;
    }
    if (lead) std::printf("exported the weights to %s as Hugging Face safetensors\n", dir.c_str());
  }

  // The first step pays for cold caches and allocations; the median of the
  // rest is the figure to compare.
  double medianStep = 0;
  if (stepSeconds.size() > 1) {
    medianStep = medianAfterFirst(stepSeconds);
    if (lead) {
      std::printf(
          "median step %.2f ms (steps after the first), %.0f tokens/s, %.0f tokens/s per rank\n",
          medianStep * 1e3, globalTokens / medianStep, globalTokens / medianStep / job->world_size);
      printMfu(e.plan(), medianStep);
    }
  }
  absl::StatusOr<json> memory = memoryReport(e, *job->world, options.deterministic);
  if (!memory.ok()) return memory.status();
  if (lead && !absl::GetFlag(FLAGS_memory_out).empty()) {
    if (absl::Status s = writeJson(absl::GetFlag(FLAGS_memory_out), *memory); !s.ok()) return s;
  }
  // A pipeline's bubbles are host waits: on a GPU the transfers' waits are
  // stream waits, and the host's time says nothing.
  json bubbles;
  if (plan->programs.size() > 1 && options.device == runtime::ExecutorDevice::kCpu) {
    absl::StatusOr<json> gathered =
        gatherBubbles(*job->world, e.stage(), bubbleSeconds, stepSeconds, plan->predicted);
    if (!gathered.ok()) return gathered.status();
    if (lead) std::printf("%s", bubbleTable(*gathered).c_str());
    bubbles = *std::move(gathered);
  }
  std::optional<json> mergedTrace;
  if (options.trace) {
    absl::StatusOr<json> trace = e.trace().merge(*job->world);
    if (!trace.ok()) return trace.status();
    if (lead) {
      if (absl::Status s = writeTrace(*trace); !s.ok()) return s;
      mergedTrace = *std::move(trace);
    }
  }
  if (lead && !absl::GetFlag(FLAGS_report_dir).empty()) {
    const ReportInput report{
        .plan = &e.plan(),
        .title = absl::StrCat(plan->model, " on ", plan->mesh.toString(), ", ", job->world_size,
                              " ranks, ", absl::GetFlag(FLAGS_device), ", ", backendName()),
        .steps = std::move(history),
        .memory = *memory,
        .bubbles = std::move(bubbles),
        .trace = std::move(mergedTrace)};
    if (absl::Status s = writeReport(absl::GetFlag(FLAGS_report_dir), report); !s.ok()) return s;
  }
  if (lead && !absl::GetFlag(FLAGS_losses_out).empty()) {
    if (absl::Status s =
            writeJson(absl::GetFlag(FLAGS_losses_out), {{"losses", losses},
                                                        {"first_step", firstStep},
                                                        {"eval_losses", evalLosses},
                                                        {"model", plan->model},
                                                        {"step_seconds", stepSeconds},
                                                        {"median_step_seconds", medianStep}});
        !s.ok()) {
      return s;
    }
  }
  // Leave together, so that no rank tears down a group its peers still use.
  absl::StatusOr<std::shared_ptr<comm::Work>> barrier = job->world->barrier();
  if (!barrier.ok()) return barrier.status();
  return (*barrier)->wait(timeout);
}

}  // namespace
}  // namespace loom::train

int main(int argc, char** argv) {
  // Before anything else: it may execute the program again.
  loom::runtime::cpu::reexecWithBetterBlasCore(argv);
  absl::SetProgramUsageMessage(
      "runs a plan.json on every rank and trains: train --plan=DIR/plan.json --steps=K "
      "[--nproc=N] [--device=cpu|cuda] [--backend=gloo|mpi|nccl] [--data=synthetic|FILE]");
  absl::ParseCommandLine(argc, argv);
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "train: --device=%s is not one of cpu, cuda\n", device.c_str());
    return 2;
  }
  // Exit 3 marks a skip, as calibrate and comm-bench do, so that scripts
  // tell a machine without a GPU from a failure. A rank whose LOCAL_RANK
  // has no GPU is a failure instead (Executor::create says so).
  if (device == "cuda") {
    if (const std::string reason = loom::runtime::cudaDeviceUnavailableReason(0); !reason.empty()) {
      std::fprintf(stderr, "train: skipped: %s\n", reason.c_str());
      return 3;
    }
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc > 1 && !loom::train::underLauncher())
    return loom::train::runAsLauncher(argc, argv, nproc);
  if (absl::Status s = loom::train::train(); !s.ok()) {
    std::fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
