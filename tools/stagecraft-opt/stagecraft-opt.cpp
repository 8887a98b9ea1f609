//===- stagecraft-opt.cpp - The pipe optimizer driver ---------------------===//
//
// mlir-opt for `pipe` IR: registers the pipe dialect and all its passes.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<stagecraft::pipe::PipeDialect>();
  stagecraft::pipe::registerPipePasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "Stagecraft pipeline schedule optimizer\n", registry));
}
