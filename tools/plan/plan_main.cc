// plan: the planner's command line. It plans a model on a mesh and prints
// the report (writing plan.json, plan.mlir, report.md and trace.json with
// --out), or prints a model's verified nn graph and its summary:
//
//   bazel run //tools:plan    # llama3-8b, fsdp=8 on one 8-GPU H100 host
//   bazel run //tools:plan -- --model=llama3-70b --mesh=8x8 --axes=fsdp,tp
//       --device=h100 --devices-per-host=8 --memory-gb=80 --out=/tmp/plan
//   bazel run //tools:plan -- --model=llama3-70b --mesh=auto --devices=256
//       --pin tp=8 --max-tp=8 --memory-gb=80 --profile=h100.json --out=/tmp/plan
//   bazel run //tools:plan -- --model=llama3-8b --dtype=bf16 --grad-reduce-dtype=f32
//       --mesh=8 --axes=fsdp
//   bazel run //tools:plan -- --model=llama3-8b --emit=summary
//   bazel run //tools:plan -- --model=tiny:layers=2 --seq=16 --emit=graph
//   bazel run //tools:plan -- --model=path/to/config.json --mesh=8 --axes=fsdp --batch=8
//   bazel run //tools:plan -- --model=path/to/model.mlir --emit=graph
//
// Flags are llvm::cl options so that multi-word flags keep dashes
// (--device-type, --memory-gb), as the design's command lines spell them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/cost/machine_profile.h"
#include "planner/cost/search.h"
#include "planner/export/report.h"
#include "planner/export/visual_report.h"
#include "planner/models/hf_config.h"
#include "planner/models/model_config.h"
#include "tools/plan/auto_plan.h"
#include "tools/plan/graph_summary.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"

namespace {

namespace cl = ::llvm::cl;

cl::OptionCategory& planCategory() {
  static cl::OptionCategory category("plan options");
  return category;
}

// The description lists the zoo's names; main() sets it from the zoo.
cl::opt<std::string> model_flag("model", cl::value_desc("NAME|tiny:...|FILE.json|FILE.mlir"),
                                cl::cat(planCategory()));
cl::opt<int64_t> batch_flag("batch",
                            cl::desc("sequences per step (zoo models and config.json files; "
                                     "default one per data-parallel rank; with --mesh=auto "
                                     "the global batch, default one per device)"),
                            cl::cat(planCategory()));
cl::opt<int64_t> seq_flag("seq",
                          cl::desc("tokens per sequence (zoo models and config.json files; "
                                   "default min(max_seq, 2048), and at most a sliding window)"),
                          cl::cat(planCategory()));
cl::opt<std::string> dtype_flag("dtype",
                                cl::desc("parameter type of zoo models and config.json files: f32 "
                                         "(default), bf16, f16"),
                                cl::cat(planCategory()));
cl::opt<std::string> grad_reduce_dtype_flag(
    "grad-reduce-dtype",
    cl::desc("type that parameter gradients are reduced in and kept as: bf16 or f32 (default: "
             "the parameter type; f32 with --dtype=bf16 is FSDP2's reduce_dtype=float32)"),
    cl::cat(planCategory()));
cl::opt<std::string> emit_flag(
    "emit",
    cl::desc("plan: plan on --mesh and print the report (the default with --mesh or no "
             "flags); graph: the verified nn IR, then the summary; summary: the summary only"),
    cl::cat(planCategory()));
cl::opt<std::string> mesh_flag(
    "mesh",
    cl::desc("mesh sizes, e.g. 8x8 (named by --axes), or fsdp=8,tp=8; auto: search the meshes "
             "and strategies of --devices and plan the best"),
    cl::cat(planCategory()));
cl::opt<int64_t> devices_flag("devices",
                              cl::desc("device count: what --mesh=auto plans for; with an explicit "
                                       "--mesh, checked against its product"),
                              cl::init(0), cl::cat(planCategory()));
cl::list<std::string> pin_flag("pin",
                               cl::desc("--mesh=auto: fix a choice and search the rest, e.g. "
                                        "--pin tp=8 (keys dp, fsdp, tp, prefetch, reshard, "
                                        "bucket-mb, micro-batch); repeatable"),
                               cl::cat(planCategory()));
cl::opt<int64_t> max_tp_flag("max-tp",
                             cl::desc("--mesh=auto: the largest tp degree (default: a host's "
                                      "devices)"),
                             cl::init(0), cl::cat(planCategory()));
cl::opt<bool> allow_tp_across_hosts_flag(
    "allow-tp-across-hosts",
    cl::desc("accept tp groups that span hosts (a warning instead of an error; --mesh=auto "
             "then searches them too)"),
    cl::init(false), cl::cat(planCategory()));
cl::opt<std::string> profile_flag(
    "profile",
    cl::desc("machine profile JSON (//tools:calibrate) whose measured GEMM and collective "
             "figures replace the datasheet's"),
    cl::cat(planCategory()));
cl::opt<int64_t> top_flag("top", cl::desc("--mesh=auto: rows of the ranked table (default 10)"),
                          cl::init(10), cl::cat(planCategory()));
cl::opt<std::string> axes_flag("axes",
                               cl::desc("one strategy per mesh axis: fsdp, dp, tp or pp, e.g. fsdp,tp"),
                               cl::cat(planCategory()));
cl::opt<std::string> device_flag(
    "device", cl::desc("device kind: h100 (default), h200, a100-80gb, a100-40gb, cpu"),
    cl::init("h100"), cl::cat(planCategory()));
cl::opt<int64_t> devices_per_host_flag("devices-per-host", cl::desc("devices per host (default 8)"),
                                       cl::init(8), cl::cat(planCategory()));
cl::opt<double> memory_gb_flag("memory-gb",
                               cl::desc("device memory in GiB (default: the device's)"),
                               cl::init(0), cl::cat(planCategory()));
cl::opt<std::string> offload_flag(
    "offload",
    cl::desc("what lives in host memory (docs/planner_offload.md): none (default), or optimizer "
             "(the AdamW states and f32 master copies, stepped on the host; gradient shards "
             "copied there as the backward pass makes them, updated parameters copied back)"),
    cl::init("none"), cl::cat(planCategory()));
cl::opt<double> host_memory_gb_flag(
    "host-memory-gb",
    cl::desc("host memory per rank for offloaded buffers in GiB (default: the device's share "
             "of its host's memory, 256 GiB on a DGX H100)"),
    cl::init(0), cl::cat(planCategory()));
cl::opt<std::string> out_flag("out",
                              cl::desc("directory for plan.json, plan.mlir, report.md, trace.json"),
                              cl::cat(planCategory()));
cl::opt<uint64_t> seed_flag("seed", cl::desc("seed of the parameters' init specs (default 0)"),
                            cl::init(0), cl::cat(planCategory()));
cl::opt<int64_t> prefetch_flag("prefetch",
                               cl::desc("parameter-gather steps prefetched ahead (default 1)"),
                               cl::init(1), cl::cat(planCategory()));
cl::opt<bool> reshard_flag(
    "reshard-after-forward",
    cl::desc("gather parameters again for the backward pass (default true; false keeps the "
             "forward copy)"),
    cl::init(true), cl::cat(planCategory()));
cl::opt<bool> sequence_parallel_flag(
    "sequence-parallel",
    cl::desc("Megatron sequence parallelism on the tp axis: norms and residual adds on "
             "sequence shards, each tp all-reduce a reduce-scatter plus an all-gather"),
    cl::init(false), cl::cat(planCategory()));
cl::opt<std::string> recompute_flag(
    "recompute",
    cl::desc("activation recompute: none (default), full (a layer keeps only its input and "
             "recomputes the rest in backward), selective (keeps matmul and attention "
             "results, recomputes the cheap ops) or auto (the least that fits the memory; "
             "with --mesh=auto the search chooses unless a mode is given)"),
    cl::init("none"), cl::cat(planCategory()));
cl::opt<int64_t> recompute_every_flag(
    "recompute-every", cl::desc("recompute every k-th layer only (default 1: every layer)"),
    cl::init(1), cl::cat(planCategory()));
cl::opt<std::string> recompute_layers_flag(
    "recompute-layers",
    cl::desc("per-layer recompute as mode:count runs in layer order, e.g. full:4,selective:10 "
             "(the later layers take --recompute); --recompute=auto chooses such a mix"),
    cl::init(""), cl::cat(planCategory()));
cl::opt<int64_t> micro_steps_flag(
    "micro-steps",
    cl::desc("micro-steps per optimizer step (gradient accumulation; default 1): --batch is the "
             "step's, each micro-step plans batch / micro-steps sequences"),
    cl::init(1), cl::cat(planCategory()));
cl::opt<bool> keep_gathered_flag(
    "keep-gathered",
    cl::desc("with --micro-steps > 1: gather parameters in the first micro-step only and keep "
             "them for the rest (FSDP2's reshard_after_backward=False; implies "
             "--reshard-after-forward=false)"),
    cl::init(false), cl::cat(planCategory()));
cl::opt<bool> defer_grad_sync_flag(
    "defer-grad-sync",
    cl::desc("with --micro-steps > 1: accumulate local gradients and reduce them in the last "
             "micro-step only (FSDP2's set_requires_gradient_sync(False))"),
    cl::init(false), cl::cat(planCategory()));
cl::opt<std::string> stages_flag(
    "stages",
    cl::desc("with a pp mesh axis: layers per model chunk in model order, e.g. 3,5,5,3 (stages "
             "x virtual stages counts; default: balanced by FLOPs)"),
    cl::init(""), cl::cat(planCategory()));
cl::opt<int64_t> virtual_stages_flag(
    "virtual-stages",
    cl::desc("with a pp mesh axis: model chunks per stage (default 1; more interleave them)"),
    cl::init(1), cl::cat(planCategory()));
cl::opt<std::string> schedule_flag(
    "schedule",
    cl::desc("with a pp mesh axis: gpipe, 1f1b or interleaved-1f1b (default: 1f1b, "
             "interleaved-1f1b with --virtual-stages > 1); the micro-steps are its micro-batches"),
    cl::init(""), cl::cat(planCategory()));
cl::opt<int64_t> bucket_mb_flag(
    "bucket-mb", cl::desc("largest gathered bucket in MiB (default 0: one per unit)"), cl::init(0),
    cl::cat(planCategory()));

cl::opt<double> adam_lr_flag("adam-lr", cl::desc("AdamW learning rate (default 0.001)"),
                             cl::init(1e-3), cl::cat(planCategory()));
cl::opt<double> adam_beta1_flag("adam-beta1",
                                cl::desc("AdamW decay of the first moment (default 0.9)"),
                                cl::init(0.9), cl::cat(planCategory()));
cl::opt<double> adam_beta2_flag("adam-beta2",
                                cl::desc("AdamW decay of the second moment (default 0.999)"),
                                cl::init(0.999), cl::cat(planCategory()));
cl::opt<double> adam_eps_flag("adam-eps", cl::desc("AdamW epsilon (default 1e-8)"), cl::init(1e-8),
                              cl::cat(planCategory()));
cl::opt<double> weight_decay_flag("weight-decay",
                                  cl::desc("AdamW decoupled weight decay (default 0.01)"),
                                  cl::init(0.01), cl::cat(planCategory()));

int fail(const std::string& message) {
  llvm::errs() << "plan: " << message << "\n";
  return 2;
}

template <typename T>
std::optional<T> ifSet(const cl::opt<T>& flag) {
  if (flag.getNumOccurrences() == 0) return std::nullopt;
  return flag.getValue();
}

// The optimizer steps' hyperparameters (plan-optimizer-step's options).
loom::tools::plan::PlanRequest::AdamW adamwFlags() {
  return {.lr = adam_lr_flag,
          .beta1 = adam_beta1_flag,
          .beta2 = adam_beta2_flag,
          .eps = adam_eps_flag,
          .weight_decay = weight_decay_flag};
}

bool writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  return static_cast<bool>(file);
}

// Writes the plan's files (plan.json, plan.mlir, report.md, trace.json,
// report.html and, from a search, candidates.json and search.html) into
// --out.
int writeOutputs(mlir::ModuleOp module, const loom::plan::Plan& plan, const std::string& report,
                 const nlohmann::json* candidates,
                 const std::vector<loom::planner::visual::SearchPoint>* points = nullptr) {
  if (out_flag.empty()) return 0;
  std::error_code error;
  const std::filesystem::path dir(out_flag.getValue());
  std::filesystem::create_directories(dir, error);
  if (error) return fail("cannot create --out directory '" + out_flag + "': " + error.message());
  std::string mlir;
  llvm::raw_string_ostream mlir_os(mlir);
  module.print(mlir_os);
  bool ok =
      writeFile(dir / "plan.json", loom::plan::writePlan(plan)) &&
      writeFile(dir / "plan.mlir", mlir + "\n") && writeFile(dir / "report.md", report) &&
      writeFile(dir / "trace.json", loom::planner::exporter::chromeTrace(plan).dump(1) + "\n");
  if (candidates) ok = ok && writeFile(dir / "candidates.json", candidates->dump(2) + "\n");
  absl::StatusOr<std::string> page = loom::planner::visual::renderPlanPage(plan);
  if (!page.ok()) return fail("cannot draw report.html: " + std::string(page.status().message()));
  ok = ok && writeFile(dir / "report.html", *page);
  if (points) {
    ok = ok && writeFile(dir / "search.html", loom::planner::visual::renderSearchPage(
                                                  *points, "mesh search: " + model_flag));
  }
  if (!ok) return fail("cannot write the plan files into '" + out_flag + "'");
  // The report on stdout is buffered; this line on stderr is not. Flush
  // first so a terminal shows the report whole, then this line.
  llvm::outs().flush();
  llvm::errs() << "plan: wrote plan.json, plan.mlir, report.md, trace.json, report.html"
               << (candidates ? ", candidates.json, search.html" : "") << " to " << out_flag
               << "\n";
  return 0;
}

// Plans the module and prints the report; with --out, writes the plan's
// four files.
int plan(mlir::ModuleOp module, const loom::planner::cost::MachineProfile* profile) {
  const loom::tools::plan::PlanRequest request{.model_name = model_flag,
                                               .mesh = mesh_flag,
                                               .axes = axes_flag,
                                               .device = device_flag,
                                               .devices_per_host = devices_per_host_flag,
                                               .memory_gb = memory_gb_flag,
                                               .offload = offload_flag,
                                               .host_memory_gb = host_memory_gb_flag,
                                               .seed = seed_flag,
                                               .prefetch = prefetch_flag,
                                               .reshard_after_forward = reshard_flag,
                                               .bucket_mb = bucket_mb_flag,
                                               .sequence_parallel = sequence_parallel_flag,
                                               .recompute = recompute_flag,
                                               .recompute_every = recompute_every_flag,
                                               .recompute_layers = recompute_layers_flag,
                                               .micro_steps = micro_steps_flag,
                                               .keep_gathered = keep_gathered_flag,
                                               .defer_grad_sync = defer_grad_sync_flag,
                                               .virtual_stages = virtual_stages_flag,
                                               .stage_layers = stages_flag,
                                               .schedule = schedule_flag,
                                               .grad_reduce_dtype = grad_reduce_dtype_flag,
                                               .adamw = adamwFlags(),
                                               .profile = profile};
  if (host_memory_gb_flag < 0) {
    return fail(absl::StrCat("--host-memory-gb must be >= 0, got: ", host_memory_gb_flag.getValue(),
                             "; give the host memory per rank in GiB"));
  }
  for (const auto& [name, occurrences] : {std::pair{"pin", pin_flag.getNumOccurrences()},
                                          std::pair{"max-tp", max_tp_flag.getNumOccurrences()},
                                          std::pair{"top", top_flag.getNumOccurrences()}}) {
    if (occurrences > 0) {
      return fail(std::string("--") + name +
                  " applies to --mesh=auto, not to --mesh=" + mesh_flag.getValue());
    }
  }
  absl::StatusOr<std::vector<std::string>> warnings =
      loom::tools::plan::checkMesh(request, devices_flag, allow_tp_across_hosts_flag);
  if (!warnings.ok()) return fail(std::string(warnings.status().message()));
  for (const std::string& warning : *warnings) llvm::errs() << "plan: " << warning << "\n";
  absl::StatusOr<loom::tools::plan::PlanResult> result =
      loom::tools::plan::planModule(module, request);
  if (!result.ok()) return fail(std::string(result.status().message()));
  // The terminal gets one row per parameter of the repeated layers;
  // report.md every parameter.
  if (request.recompute == "auto") {
    llvm::errs() << "plan: --recompute=auto chose " << result->recompute << "\n";
  }
  const std::string report = loom::planner::exporter::formatReport(result->plan);
  llvm::outs() << loom::planner::exporter::formatReport(result->plan, {.group_layers = true});
  return writeOutputs(module, result->plan, report, nullptr);
}

// Progress of a search on stderr: a bar on a terminal, else a line per
// batch of candidates.
void showProgress(int64_t evaluated, int64_t enumerated) {
  if (isatty(STDERR_FILENO)) {
    constexpr int kWidth = 30;
    const int filled = enumerated > 0 ? static_cast<int>(kWidth * evaluated / enumerated) : 0;
    llvm::errs() << "\rplan: search [" << std::string(filled, '#')
                 << std::string(kWidth - filled, ' ') << "] " << evaluated << " evaluated of "
                 << enumerated;
    llvm::errs().flush();
    return;
  }
  llvm::errs() << "plan: search: " << evaluated << " of " << enumerated
               << " candidates evaluated\n";
}

// --mesh=auto: search, print the ranking and the winner's report, write
// the winner's files and candidates.json.
int planAuto(const std::optional<int64_t>& batch, const std::optional<int64_t>& seq,
             const loom::planner::cost::MachineProfile* profile) {
  loom::planner::cost::Pins pins;
  for (const std::string& pin : pin_flag) {
    const std::vector<std::string> items = absl::StrSplit(pin, ',', absl::SkipEmpty());
    for (const std::string& item : items) {
      if (absl::Status status = loom::planner::cost::parsePin(item, pins); !status.ok()) {
        return fail(std::string(status.message()));
      }
    }
  }
  if (!axes_flag.empty()) {
    return fail(
        "--axes does not apply to --mesh=auto, which chooses the strategies; pin them "
        "with --pin (e.g. --pin tp=8) or give an explicit --mesh");
  }
  // Given, --sequence-parallel pins the choice the search otherwise makes.
  // The accumulation levers as pins; the micro-steps follow from the
  // micro-batch the search picks.
  if (micro_steps_flag.getNumOccurrences() > 0) {
    return fail(
        "--micro-steps applies to an explicit mesh; with --mesh=auto the search picks the "
        "micro-batch (and so the micro-steps) under --batch: fix it with --pin micro-batch=N");
  }
  for (const auto& [name, occurrences] :
       {std::pair{"stages", stages_flag.getNumOccurrences()},
        std::pair{"virtual-stages", virtual_stages_flag.getNumOccurrences()},
        std::pair{"schedule", schedule_flag.getNumOccurrences()}}) {
    if (occurrences > 0) {
      return fail(std::string("--") + name +
                  " applies to an explicit mesh with a pp axis (e.g. --mesh=pp=2,fsdp=4); "
                  "--mesh=auto chooses the stages and cuts the model itself: fix its choice "
                  "with --pin pp=N, --pin virtual-stages=N or --pin schedule=NAME");
    }
  }
  if (recompute_layers_flag.getNumOccurrences() > 0) {
    return fail(
        "--recompute-layers applies to an explicit mesh; with --mesh=auto the search picks one "
        "mode per candidate: fix it with --pin recompute=none|selective|full");
  }
  // The search tries offload where nothing fits without it; --offload
  // fixes the choice for every candidate.
  if (offload_flag.getNumOccurrences() > 0) {
    if (absl::Status pinned = loom::planner::cost::parsePin("offload=" + offload_flag, pins);
        !pinned.ok()) {
      return fail(absl::StrCat("--offload='", offload_flag.getValue(),
                               "' is not none or optimizer (docs/planner_offload.md)"));
    }
  }
  if (keep_gathered_flag.getNumOccurrences() > 0) pins.keep_gathered = keep_gathered_flag;
  if (defer_grad_sync_flag.getNumOccurrences() > 0) pins.defer_grad_sync = defer_grad_sync_flag;
  if (sequence_parallel_flag.getNumOccurrences() > 0) {
    pins.sequence_parallel = sequence_parallel_flag.getValue();
  }
  mlir::MLIRContext context;
  absl::StatusOr<loom::tools::plan::AutoResult> result = loom::tools::plan::planAuto(
      context, {.model = model_flag,
                .devices = devices_flag,
                .batch = batch,
                .seq = seq,
                .dtype = ifSet(dtype_flag),
                .device = device_flag,
                .devices_per_host = devices_per_host_flag,
                .memory_gb = memory_gb_flag,
                .host_memory_gb = host_memory_gb_flag,
                .seed = seed_flag,
                .adamw = adamwFlags(),
                .pins = pins,
                .max_tp = max_tp_flag,
                .allow_tp_across_hosts = allow_tp_across_hosts_flag,
                .profile = profile,
                .progress = showProgress,
                .grad_reduce_dtype = grad_reduce_dtype_flag,
                .recompute = recompute_flag.getNumOccurrences() > 0
                                 ? std::optional<std::string>(recompute_flag.getValue())
                                 : std::nullopt,
                .recompute_every = recompute_every_flag});
  if (isatty(STDERR_FILENO)) llvm::errs() << "\n";
  if (!result.ok()) return fail(std::string(result.status().message()));
  llvm::errs() << absl::StrFormat(
      "plan: search: %d of %d candidates evaluated (%d pruned over memory, %d by the bound, %d "
      "with recompute and %d with offload not tried) in %.3f s; planning the winner took "
      "%.3f s\n",
      result->search.evaluated, result->search.enumerated, result->search.pruned_memory,
      result->search.pruned_bound, result->search.pruned_recompute, result->search.pruned_offload,
      result->search_s, result->plan_s);
  const std::string search = loom::tools::plan::formatSearch(*result, top_flag) + "\n";
  const std::string report = search + loom::planner::exporter::formatReport(result->plan.plan);
  llvm::outs() << search
               << loom::planner::exporter::formatReport(result->plan.plan, {.group_layers = true});
  const std::vector<loom::planner::visual::SearchPoint> points =
      loom::tools::plan::searchPoints(result->search);
  return writeOutputs(*result->module, result->plan.plan, report, &result->candidates, &points);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model_help = absl::StrCat(
      "a published model (", absl::StrJoin(loom::planner::models::publishedConfigNames(), ", "),
      "), tiny[:family=gpt2|llama,layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..,"
      "seq=..], a Hugging Face FILE.json (a config.json of ",
      absl::StrJoin(loom::planner::models::supportedHfArchitectures(), ", "),
      "; --batch/--seq/--dtype apply as for the zoo), or a FILE.mlir");
  model_flag.setDescription(model_help);
  cl::HideUnrelatedOptions(planCategory());
  std::string errors;
  llvm::raw_string_ostream errors_os(errors);
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "plans a model on a device mesh and prints the report, or prints its nn graph and "
          "summary\n",
          &errors_os)) {
    return fail(errors + "see plan --help");
  }
  // No flags: the built-in default, Llama 3 8B under fsdp on one 8-GPU
  // H100 host.
  std::optional<int64_t> batch = ifSet(batch_flag);
  std::optional<int64_t> seq = ifSet(seq_flag);
  if (argc == 1) {
    model_flag = "llama3-8b";
    mesh_flag = "8";
    axes_flag = "fsdp";
    batch = 8;
  }
  if (emit_flag.empty()) emit_flag = mesh_flag.empty() ? "summary" : "plan";
  if (emit_flag != "graph" && emit_flag != "summary" && emit_flag != "plan") {
    return fail("--emit='" + emit_flag.getValue() +
                "' is not an output; use plan, graph or summary");
  }
  if (model_flag.empty()) {
    return fail(
        "--model is required, e.g. --model=llama3-8b, --model=tiny:layers=2, "
        "--model=path/to/config.json or --model=model.mlir");
  }
  if (emit_flag == "plan" && mesh_flag.empty()) {
    return fail("--emit=plan needs --mesh, e.g. --mesh=8 --axes=fsdp");
  }
  std::optional<loom::planner::cost::MachineProfile> profile;
  if (!profile_flag.empty()) {
    absl::StatusOr<loom::planner::cost::MachineProfile> loaded =
        loom::planner::cost::loadMachineProfile(profile_flag);
    if (!loaded.ok()) return fail(std::string(loaded.status().message()));
    profile = *std::move(loaded);
  }
  if (emit_flag == "plan" && mesh_flag == "auto") {
    return planAuto(batch, seq, profile ? &*profile : nullptr);
  }
  // An explicit mesh plans one sequence per data-parallel rank and
  // micro-step by default (a graph file fixes its own micro-step batch).
  if (emit_flag == "plan" && !batch && !absl::EndsWith(model_flag.getValue(), ".mlir")) {
    if (absl::StatusOr<int64_t> ranks = loom::tools::plan::dataParallelSize(mesh_flag, axes_flag);
        ranks.ok()) {
      batch = *ranks * micro_steps_flag;
    }
  }
  // The graph is one micro-step's: the step's batch split over the
  // micro-steps.
  if (micro_steps_flag < 1) return fail("--micro-steps must be >= 1");
  if (mesh_flag != "auto" && micro_steps_flag == 1 &&
      (keep_gathered_flag || defer_grad_sync_flag)) {
    return fail(
        "--keep-gathered and --defer-grad-sync act between the micro-steps of an optimizer step; "
        "add --micro-steps=K with K > 1 (and a --batch that K divides)");
  }
  if (batch && micro_steps_flag > 1) {
    if (*batch % micro_steps_flag != 0) {
      return fail(absl::StrCat("--batch=", *batch,
                               " does not split into --micro-steps=", micro_steps_flag.getValue(),
                               " equal micro-batches; use a multiple of it"));
    }
    batch = *batch / micro_steps_flag;
  }
  mlir::MLIRContext context;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module = loom::tools::plan::loadModel(
      context, {.model = model_flag, .batch = batch, .seq = seq, .dtype = ifSet(dtype_flag)});
  if (!module.ok()) return fail(std::string(module.status().message()));
  if (emit_flag == "plan") return plan(**module, profile ? &*profile : nullptr);
  if (emit_flag == "graph") {
    (*module)->print(llvm::outs());
    llvm::outs() << "\n";
  }
  bool first = true;
  for (mlir::func::FuncOp func : (*module)->getOps<mlir::func::FuncOp>()) {
    absl::StatusOr<loom::tools::plan::GraphSummary> summary =
        loom::tools::plan::summarizeGraph(func);
    if (!summary.ok()) return fail(std::string(summary.status().message()));
    if (!first) llvm::outs() << "\n";
    first = false;
    llvm::outs() << loom::tools::plan::formatSummary(*summary);
  }
  return 0;
}
