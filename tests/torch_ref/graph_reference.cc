// graph_reference: the Loom side of torch_matches_graph_test. For a zoo
// model it initialises every parameter with the Philox initialiser from the
// init specs plan.json would give, writes them as a 1-rank checkpoint (step
// 0), writes a token file, takes the first two global batches of the file
// feed and of the synthetic feed,
// evaluates the loss and every parameter gradient of step 0 with the float64
// nn evaluator on the plan-autodiff graph, applies one AdamW step with the
// runtime's AdamW to those gradients and saves the result, moments included,
// as a 3-rank checkpoint (step 1, uneven dim-0 shards). reference.json
// records what the PyTorch side must reproduce.
//
//   graph_reference --model=tiny --batch=2 --seq=8 --out=DIR
//       [--init-seed=0] [--data-seed=0]
//
// DIR gets tokens.bin, ckpt/step_0, ckpt/step_1 and reference.json.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/hash_store.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "nlohmann/json.hpp"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "runtime/checkpoint/checkpoint_writer.h"
#include "runtime/checkpoint/shard_file.h"
#include "runtime/data/token_feed.h"
#include "runtime/init/counter_rng.h"
#include "runtime/optim/adamw.h"

namespace {

namespace models = ::loom::planner::models;
namespace ckpt = ::loom::runtime::checkpoint;
namespace data = ::loom::runtime::data;
using ::loom::planner::nn::eval::Tensor;
using ::loom::runtime::init::InitSpec;
using nlohmann::json;

constexpr int64_t kTokenCount = 4096;
constexpr int64_t kStep1Ranks = 3;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  InitSpec init;
  std::vector<float> values;
};

// The init plan.json gives a parameter: planner/export/plan_json.cc's
// initJson is internal to the exporter, so its rule is restated here (and
// in torch_train.py's init_spec_for): norm scales ones, names ending in
// ".bias" zeros (a slice "c_attn.bias[0:64]" like its tensor), the rest
// normal(0, 0.02); the stream is the ordinal.
InitSpec initSpecFor(const std::string& sliced_name, uint64_t seed, uint64_t stream) {
  const std::string name = sliced_name.substr(0, sliced_name.find('['));
  InitSpec spec{.kind = InitSpec::Kind::kNormal,
                .mean = 0.0f,
                .std = 0.02f,
                .seed = seed,
                .stream_id = stream};
  if (absl::EndsWith(name, "norm.weight") || absl::EndsWith(name, "ln_1.weight") ||
      absl::EndsWith(name, "ln_2.weight") || absl::EndsWith(name, "ln_f.weight")) {
    spec.kind = InitSpec::Kind::kOnes;
    spec.std = 0.0f;
  } else if (absl::EndsWith(name, ".bias")) {
    spec.kind = InitSpec::Kind::kZeros;
    spec.std = 0.0f;
  }
  return spec;
}

const char* kindName(InitSpec::Kind kind) {
  switch (kind) {
    case InitSpec::Kind::kNormal:
      return "normal";
    case InitSpec::Kind::kZeros:
      return "zeros";
    case InitSpec::Kind::kOnes:
      return "ones";
  }
  return "?";
}

std::vector<int64_t> shapeOf(mlir::Type type) {
  auto shape = llvm::cast<mlir::RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

int64_t elementsOf(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A token stream with structure (mostly a fixed successor per token) so a
// few training steps visibly lower the loss.
std::vector<int32_t> makeTokens(int64_t vocab) {
  std::vector<int32_t> tokens(kTokenCount);
  for (int64_t i = 0; i < kTokenCount; ++i) {
    tokens[i] = static_cast<int32_t>((7 * i + 3 * (i / 5)) % vocab);
  }
  return tokens;
}

struct NamedTensor {
  std::string name;
  const std::vector<int64_t>* shape;
  const std::vector<float>* values;
};

// Saves `tensors` as step `step` of `dir` on `world` ranks, each rank
// holding its padShard box along dim 0 in a padded buffer; the ranks run as
// threads meeting in one HashStore, as a real job's would.
absl::Status saveSharded(const std::string& dir, int64_t step, int64_t world,
                         const std::vector<NamedTensor>& tensors, const json& metadata) {
  loom::comm::HashStore store;
  std::vector<absl::Status> statuses(world);
  std::vector<std::vector<std::vector<float>>> buffers(world);
  std::vector<std::vector<ckpt::ShardView>> views(world);
  for (int64_t r = 0; r < world; ++r) {
    for (size_t t = 0; t < tensors.size(); ++t) {
      const std::vector<int64_t>& shape = *tensors[t].shape;
      const ckpt::DimSplit split{.dim = 0, .ways = world, .index = r};
      absl::StatusOr<ckpt::PaddedShard> shard = ckpt::padShard(shape, {&split, 1});
      if (!shard.ok()) return shard.status();
      // The padded local buffer: the box's rows, then padding rows.
      const int64_t row = elementsOf(shape) / shape[0];
      std::vector<float> buffer(elementsOf(shard->local_shape), -1.0f);
      const int64_t begin = shard->box.offsets[0] * row;
      const int64_t count = shard->box.sizes[0] * row;
      for (int64_t i = 0; i < count; ++i) buffer[i] = (*tensors[t].values)[begin + i];
      buffers[r].push_back(std::move(buffer));
      views[r].push_back(
          {tensors[t].name, ckpt::DType::kF32, shape, shard->box, shard->local_shape, nullptr});
    }
    for (size_t t = 0; t < tensors.size(); ++t) views[r][t].data = buffers[r][t].data();
  }
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ckpt::CheckpointWriter writer(dir,
                                    {.mesh = absl::StrCat("fsdp=", world), .progress = nullptr});
      statuses[r] = writer.save(step, views[r], metadata, store, r, world, absl::Seconds(30));
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

int fail(const std::string& message) {
  std::fprintf(stderr, "graph_reference: %s\n", message.c_str());
  return 1;
}

struct Flags {
  std::string model;
  int64_t batch = 0;
  int64_t seq = 0;
  std::string out;
  int64_t init_seed = 0;
  int64_t data_seed = 0;
};

bool parseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = arg.substr(0, eq);
    const std::string value = arg.substr(eq + 1);
    if (key == "--model") {
      flags.model = value;
    } else if (key == "--out") {
      flags.out = value;
    } else if (key == "--batch" || key == "--seq" || key == "--init-seed" || key == "--data-seed") {
      int64_t* field = key == "--batch"       ? &flags.batch
                       : key == "--seq"       ? &flags.seq
                       : key == "--init-seed" ? &flags.init_seed
                                              : &flags.data_seed;
      if (!absl::SimpleAtoi(value, field)) return false;
    } else {
      return false;
    }
  }
  return !flags.model.empty() && !flags.out.empty() && flags.batch > 0 && flags.seq > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!parseFlags(argc, argv, flags)) {
    std::fprintf(stderr,
                 "usage: %s --model=SPEC --batch=B --seq=S --out=DIR "
                 "[--init-seed=N] [--data-seed=N]\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<models::TransformerConfig> config = models::configFromSpec(flags.model);
  if (!config.ok()) return fail(std::string(config.status().message()));
  mlir::MLIRContext context;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> built = models::buildModel(
      context, *config, {.batch = flags.batch, .seq = flags.seq}, mlir::Float32Type::get(&context));
  if (!built.ok()) return fail(std::string(built.status().message()));
  mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(loom::planner::autodiff::createPlanAutodiff());
  if (mlir::failed(mlir::verify(*module)) || mlir::failed(pm.run(*module)) ||
      mlir::failed(mlir::verify(*module))) {
    return fail("the zoo graph does not verify or differentiate");
  }
  auto func = *module->getOps<mlir::func::FuncOp>().begin();

  // Parameters in argument order, initialised as plan.json says.
  std::vector<Param> params;
  std::vector<unsigned> param_args;
  for (unsigned i = 0; i + 1 < func.getNumArguments(); ++i) {
    auto name =
        func.getArgAttrOfType<mlir::StringAttr>(i, loom::planner::nn::NnDialect::kNameAttrName);
    if (!func.getArgAttr(i, loom::planner::nn::NnDialect::kParamAttrName) || !name) continue;
    Param p;
    p.name = name.str();
    p.shape = shapeOf(func.getArgumentTypes()[i]);
    p.init = initSpecFor(p.name, static_cast<uint64_t>(flags.init_seed), params.size());
    p.values.resize(elementsOf(p.shape));
    const std::vector<int64_t> zeros(p.shape.size(), 0);
    if (absl::Status s =
            loom::runtime::init::initShard(p.init, p.shape, zeros, p.shape, p.values.data());
        !s.ok()) {
      return fail(std::string(s.message()));
    }
    params.push_back(std::move(p));
    param_args.push_back(i);
  }

  std::filesystem::create_directories(flags.out);
  const std::string token_path = flags.out + "/tokens.bin";
  if (absl::Status s =
          data::writeTokenFile(token_path, makeTokens(config->vocab), data::TokenDType::kU16);
      !s.ok()) {
    return fail(std::string(s.message()));
  }
  absl::StatusOr<std::unique_ptr<data::TokenFile>> feed =
      data::TokenFile::open(token_path, {.seed = static_cast<uint64_t>(flags.data_seed),
                                         .vocab = config->vocab,
                                         .seq = flags.seq,
                                         .global_batch = flags.batch});
  if (!feed.ok()) return fail(std::string(feed.status().message()));
  const int64_t tokens = flags.batch * flags.seq;
  json batches = json::array();
  std::vector<int32_t> ids0, labels0;
  for (int64_t step : {0, 1}) {
    std::vector<int32_t> ids(tokens), labels(tokens);
    if (absl::Status s = (*feed)->batch(step, 0, flags.batch, ids.data(), labels.data()); !s.ok()) {
      return fail(std::string(s.message()));
    }
    batches.push_back({{"step", step}, {"ids", ids}, {"labels", labels}});
    if (step == 0) {
      ids0 = ids;
      labels0 = labels;
    }
  }

  // The synthetic feed's step 0 and 1, for the Python feed to match too.
  absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> synthetic =
      data::SyntheticTokens::create({.seed = static_cast<uint64_t>(flags.data_seed),
                                     .vocab = config->vocab,
                                     .seq = flags.seq,
                                     .global_batch = flags.batch});
  if (!synthetic.ok()) return fail(std::string(synthetic.status().message()));
  json synthetic_batches = json::array();
  for (int64_t step : {0, 1}) {
    std::vector<int32_t> ids(tokens), labels(tokens);
    if (absl::Status s = (*synthetic)->batch(step, 0, flags.batch, ids.data(), labels.data());
        !s.ok()) {
      return fail(std::string(s.message()));
    }
    synthetic_batches.push_back({{"step", step}, {"ids", ids}, {"labels", labels}});
  }

  // Arguments: inputs by their location name, parameters, the loss seed.
  std::vector<Tensor> args;
  size_t next_param = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    const std::vector<int64_t> shape = shapeOf(func.getArgumentTypes()[i]);
    if (next_param < param_args.size() && param_args[next_param] == i) {
      const Param& p = params[next_param++];
      args.emplace_back(shape, std::vector<double>(p.values.begin(), p.values.end()));
      continue;
    }
    if (i + 1 == func.getNumArguments()) {
      args.emplace_back(shape, std::vector<double>{1.0});
      continue;
    }
    const auto loc = llvm::dyn_cast<mlir::NameLoc>(func.getArgument(i).getLoc());
    const std::string input = loc ? loc.getName().str() : "";
    Tensor t(shape);
    for (int64_t k = 0; k < tokens; ++k) {
      t.values[k] = input == "labels"         ? labels0[k]
                    : input == "position_ids" ? static_cast<double>(k % flags.seq)
                                              : ids0[k];
    }
    args.push_back(std::move(t));
  }
  absl::StatusOr<std::vector<Tensor>> results = loom::planner::nn::eval::evaluate(func, args);
  if (!results.ok()) return fail(std::string(results.status().message()));

  // Step 0: the initial parameters, one rank.
  const std::string ckpt_dir = flags.out + "/ckpt";
  std::vector<NamedTensor> saved;
  for (const Param& p : params) saved.push_back({p.name, &p.shape, &p.values});
  if (absl::Status s = saveSharded(
          ckpt_dir, 0, 1, saved, {{"data_step", 0}, {"optimizer_step", 0}, {"model", flags.model}});
      !s.ok()) {
    return fail(std::string(s.message()));
  }

  // Step 1: one AdamW step on the evaluator's gradients (rounded to f32).
  const loom::runtime::optim::AdamWConfig adamw;
  json grads = json::object();
  std::vector<std::vector<float>> updated, exp_avg, exp_avg_sq;
  for (size_t k = 0; k < params.size(); ++k) {
    const Tensor& grad = (*results)[1 + k];
    grads[params[k].name] = grad.values;
    std::vector<float> g(grad.values.begin(), grad.values.end());
    updated.push_back(params[k].values);
    exp_avg.emplace_back(g.size(), 0.0f);
    exp_avg_sq.emplace_back(g.size(), 0.0f);
    loom::runtime::optim::adamwStep(adamw, 1, updated.back().data(), g.data(),
                                    exp_avg.back().data(), exp_avg_sq.back().data(),
                                    static_cast<int64_t>(g.size()));
  }
  saved.clear();
  for (size_t k = 0; k < params.size(); ++k) {
    const std::vector<int64_t>* shape = &params[k].shape;
    saved.push_back({params[k].name, shape, &updated[k]});
    saved.push_back({"exp_avg:" + params[k].name, shape, &exp_avg[k]});
    saved.push_back({"exp_avg_sq:" + params[k].name, shape, &exp_avg_sq[k]});
  }
  if (absl::Status s =
          saveSharded(ckpt_dir, 1, kStep1Ranks, saved,
                      {{"data_step", 1}, {"optimizer_step", 1}, {"model", flags.model}});
      !s.ok()) {
    return fail(std::string(s.message()));
  }

  json param_list = json::array();
  for (const Param& p : params) {
    param_list.push_back({{"name", p.name},
                          {"shape", p.shape},
                          {"init",
                           {{"kind", kindName(p.init.kind)},
                            {"mean", p.init.mean},
                            {"std", p.init.std},
                            {"seed", p.init.seed},
                            {"stream", p.init.stream_id}}}});
  }
  const json reference = {
      {"model", flags.model},
      {"batch", flags.batch},
      {"seq", flags.seq},
      {"vocab", config->vocab},
      {"init_seed", flags.init_seed},
      {"data_seed", flags.data_seed},
      {"tokens", token_path},
      {"checkpoint", ckpt_dir},
      {"params", param_list},
      {"batches", batches},
      {"synthetic_batches", synthetic_batches},
      {"loss", (*results)[0].values[0]},
      {"grads", grads},
      {"adamw",
       {{"lr", adamw.lr},
        {"betas", {adamw.beta1, adamw.beta2}},
        {"eps", adamw.eps},
        {"weight_decay", adamw.weight_decay}}},
  };
  std::ofstream(flags.out + "/reference.json") << reference.dump();
  std::printf("%s: %zu parameters, loss %.17g (float64 evaluator)\n", flags.model.c_str(),
              params.size(), (*results)[0].values[0]);
  return 0;
}
