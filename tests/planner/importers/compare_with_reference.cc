// compare_with_reference: runs an nn function through the float64 reference
// evaluator on the arguments of a torch_import.py reference file and
// compares its results with PyTorch's float64 results from that file. The
// function is either the imported .mlir itself or, with --zoo=SPEC, the zoo's
// graph of that config, which checks the zoo builder against a PyTorch model
// with the same parameter names. Exits 0 when every value agrees within the
// tolerance (relative to the result's largest magnitude), 1 otherwise.
//
//   compare_with_reference block.mlir block.json [--tolerance=1e-9]
//   compare_with_reference --zoo=tiny:layers=2,... lm.json
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "nlohmann/json.hpp"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/register.h"

namespace {

using loom::planner::nn::eval::Tensor;
namespace models = ::loom::planner::models;

int fail(const std::string& message) {
  std::fprintf(stderr, "compare_with_reference: %s\n", message.c_str());
  return 1;
}

Tensor tensorFrom(const nlohmann::json& entry) {
  return Tensor(entry.at("shape").get<std::vector<int64_t>>(),
                entry.at("values").get<std::vector<double>>());
}

// The zoo's name for an imported parameter. A chunk of a fused nn.Linear,
// rows a:b of its [out, in] weight ("w[a:b, :]"), is columns a:b of the
// [in, out] Conv1D weight GPT-2 checkpoints hold ("w[:, a:b]").
std::string zooName(std::string name) {
  if (absl::EndsWith(name, ", :]")) {
    const size_t open = name.rfind('[');
    const std::string rows = name.substr(open + 1, name.size() - open - 5);
    name = name.substr(0, open) + "[:, " + rows + "]";
  }
  return name;
}

// The reference's arguments in the order of `func`'s: parameters by name,
// the other inputs in order.
absl::StatusOr<std::vector<Tensor>> argumentsByName(mlir::func::FuncOp func,
                                                    const nlohmann::json& entries) {
  std::map<std::string, Tensor> params;
  std::vector<Tensor> inputs;
  for (const nlohmann::json& entry : entries) {
    if (entry.at("param").get<bool>()) {
      params[zooName(entry.at("name").get<std::string>())] = tensorFrom(entry);
    } else {
      inputs.push_back(tensorFrom(entry));
    }
  }
  std::vector<Tensor> arguments;
  size_t next_input = 0;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto name = func.getArgAttrOfType<mlir::StringAttr>(
        arg.getArgNumber(), loom::planner::nn::NnDialect::kNameAttrName);
    if (!name) {
      if (next_input == inputs.size()) {
        return absl::InvalidArgumentError("the reference has too few inputs");
      }
      arguments.push_back(inputs[next_input++]);
      continue;
    }
    auto found = params.find(name.str());
    if (found == params.end()) {
      return absl::InvalidArgumentError("the reference has no parameter " + name.str());
    }
    arguments.push_back(found->second);
    params.erase(found);
  }
  if (!params.empty()) {
    return absl::InvalidArgumentError("the zoo graph has no parameter " + params.begin()->first);
  }
  return arguments;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  std::string zoo;
  std::string json_path;
  double tolerance = 1e-9;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--zoo=")) {
      zoo = arg.substr(6);
    } else if (absl::StartsWith(arg, "--tolerance=")) {
      tolerance = std::atof(arg.c_str() + 12);
    } else if (absl::EndsWith(arg, ".json")) {
      json_path = arg;
    } else {
      file = arg;
    }
  }
  if (json_path.empty() || file.empty() == zoo.empty()) {
    std::fprintf(stderr, "usage: %s (FILE.mlir | --zoo=SPEC) FILE.json [--tolerance=X]\n", argv[0]);
    return 2;
  }
  nlohmann::json reference;
  try {
    reference = nlohmann::json::parse(std::ifstream(json_path));
  } catch (const nlohmann::json::exception& error) {
    return fail("cannot read " + json_path + ": " + error.what());
  }

  mlir::DialectRegistry registry;
  loom::planner::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr source_mgr;
  mlir::SourceMgrDiagnosticHandler handler(source_mgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  std::vector<Tensor> arguments;
  const nlohmann::json& entries = reference.at("arguments");
  if (zoo.empty()) {
    module = mlir::parseSourceFile<mlir::ModuleOp>(file, source_mgr, mlir::ParserConfig(&context));
    if (!module) return fail(file + " does not parse or verify");
    const std::string name = reference.at("function").get<std::string>();
    func = module->lookupSymbol<mlir::func::FuncOp>(name);
    if (!func) return fail(file + " has no func.func @" + name);
    if (entries.size() != func.getNumArguments()) {
      return fail("@" + name + " has " + std::to_string(func.getNumArguments()) +
                  " arguments but the reference gives " + std::to_string(entries.size()));
    }
    for (const nlohmann::json& entry : entries) arguments.push_back(tensorFrom(entry));
  } else {
    absl::StatusOr<models::TransformerConfig> config = models::configFromSpec(zoo);
    if (!config.ok()) return fail(std::string(config.status().message()));
    // The token ids (the first argument) give the batch shape.
    const auto ids = entries.at(0).at("shape").get<std::vector<int64_t>>();
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> built = models::buildModel(
        context, *config, {.batch = ids.at(0), .seq = ids.at(1)}, mlir::Float32Type::get(&context));
    if (!built.ok()) return fail(std::string(built.status().message()));
    module = std::move(*built);
    if (mlir::failed(mlir::verify(*module))) return fail("the zoo graph does not verify");
    func = *module->getOps<mlir::func::FuncOp>().begin();
    absl::StatusOr<std::vector<Tensor>> matched = argumentsByName(func, entries);
    if (!matched.ok()) return fail(std::string(matched.status().message()));
    arguments = std::move(*matched);
  }

  absl::StatusOr<std::vector<Tensor>> results = loom::planner::nn::eval::evaluate(func, arguments);
  if (!results.ok()) return fail(std::string(results.status().message()));
  const nlohmann::json& expected = reference.at("results");
  if (expected.size() != results->size()) {
    return fail("@" + func.getSymName().str() + " returns " + std::to_string(results->size()) +
                " values but PyTorch returned " + std::to_string(expected.size()));
  }
  bool ok = true;
  for (size_t i = 0; i < results->size(); ++i) {
    const Tensor want = tensorFrom(expected[i]);
    const Tensor& got = (*results)[i];
    if (got.shape != want.shape) {
      std::printf("result #%zu: shape differs from PyTorch's\n", i);
      ok = false;
      continue;
    }
    double scale = 1.0;
    double error = 0.0;
    for (int64_t k = 0; k < want.numElements(); ++k) {
      scale = std::max(scale, std::abs(want.values[k]));
      error = std::max(error, std::abs(got.values[k] - want.values[k]));
    }
    const bool close = error <= tolerance * scale;
    std::printf(
        "@%s result #%zu: %lld values, max |nn - torch| = %.3g (scale %.3g, "
        "tolerance %.1g) %s\n",
        func.getSymName().str().c_str(), i, static_cast<long long>(want.numElements()), error,
        scale, tolerance, close ? "ok" : "MISMATCH");
    ok &= close;
  }
  return ok ? 0 : 1;
}
