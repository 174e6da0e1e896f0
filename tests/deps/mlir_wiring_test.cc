// Wiring test for LLVM/MLIR 22: parses and verifies a module, runs a pass
// through the pass manager, and checks the pass really changed the IR.
#include <string>

#include "gtest/gtest.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace {

constexpr char kModule[] = R"mlir(
func.func @add_constants() -> i32 {
  %a = arith.constant 2 : i32
  %b = arith.constant 3 : i32
  %sum = arith.addi %a, %b : i32
  return %sum : i32
}
)mlir";

std::string print(mlir::Operation* op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

TEST(MlirWiringTest, ParsesVerifiesAndCanonicalizes) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::arith::ArithDialect>();

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kModule, &context);
  ASSERT_TRUE(module) << "the test module failed to parse";
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
  ASSERT_NE(print(*module).find("arith.addi"), std::string::npos);

  mlir::PassManager pm(&context);
  pm.addPass(mlir::createCanonicalizerPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  const std::string folded = print(*module);
  EXPECT_EQ(folded.find("arith.addi"), std::string::npos) << folded;
  EXPECT_NE(folded.find("arith.constant 5 : i32"), std::string::npos) << folded;
}

TEST(MlirWiringTest, VerifierRejectsTypeMismatch) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::arith::ArithDialect>();
  // Diagnostics go to stderr; only the parse result matters here.
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @bad() -> i32 {\n"
      "  %a = arith.constant 2 : i64\n"
      "  return %a : i64\n"
      "}\n",
      &context);
  EXPECT_FALSE(module);
}

}  // namespace
