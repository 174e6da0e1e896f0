// libFuzzer target for the model graphs the planner reads: the input is a
// .mlir file given to the plan tool's loader (tools/plan/model_loader.h),
// which parses it with the nn, dist and func dialects and verifies it. A
// module that loads must also print and parse back, and the plan tool's
// graph summary must either work or fail with a status, never crash.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "tools/plan/graph_summary.h"
#include "tools/plan/model_loader.h"

namespace {

// The loader reads a path ending in ".mlir"; each process writes its input
// to its own file under TMPDIR.
const std::string& inputPath() {
  static const std::string* path = [] {
    const char* dir = std::getenv("TMPDIR");
    return new std::string(
        absl::StrCat(dir != nullptr ? dir : "/tmp", "/loom_mlir_fuzz_", ::getpid(), ".mlir"));
  }();
  return *path;
}

void writeInput(const uint8_t* data, size_t size) {
  const int fd = ::open(inputPath().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n <= 0) std::abort();
    written += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  writeInput(data, size);
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
      loom::tools::plan::loadModel(context, {.model = inputPath()});
  if (!module.ok()) return 0;
  for (mlir::func::FuncOp func : (**module).getOps<mlir::func::FuncOp>()) {
    absl::StatusOr<loom::tools::plan::GraphSummary> summary =
        loom::tools::plan::summarizeGraph(func);
    if (summary.ok()) (void)loom::tools::plan::formatSummary(*summary);
  }
  // What verifies must print, and what prints must parse back.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  (**module)->print(os);
  mlir::OwningOpRef<mlir::ModuleOp> again =
      mlir::parseSourceString<mlir::ModuleOp>(printed, &context);
  if (!again) {
    llvm::errs() << "a verified module did not parse back after printing:\n" << printed << "\n";
    std::abort();
  }
  return 0;
}
