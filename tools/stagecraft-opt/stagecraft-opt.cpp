//===- stagecraft-opt.cpp - The pipe optimizer driver ---------------------===//
//
// mlir-opt for `pipe` IR: registers the pipe dialect and all its passes. The
// input is read here, not by MlirOptMain, so that its bracket nesting is
// checked before MLIR's recursive parser sees it.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeDialect.h"
#include "dialect/PipeParse.h"
#include "passes/Passes.h"
#include "tools/Help.h"
#include "tools/Version.h"

#include "mlir/Debug/CLOptionsSetup.h"
#include "mlir/Debug/Counter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

/// \p argv with `--mlir-print-op-on-diagnostic=false` in front unless the
/// user set that option: a diagnostic is one located line (and its notes),
/// not a dump of the operation in generic form.
static std::vector<char *> quietDiagnostics(int argc, char **argv) {
  static char flag[] = "--mlir-print-op-on-diagnostic=false";
  std::vector<char *> args(argv, argv + argc);
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]).contains("mlir-print-op-on-diagnostic"))
      return args;
  args.insert(args.begin() + 1, flag);
  return args;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  stagecraft::addVersionPrinter();
  std::vector<char *> args = quietDiagnostics(argc, argv);
  argc = static_cast<int>(args.size());
  argv = args.data();
  mlir::DialectRegistry registry;
  registry.insert<stagecraft::pipe::PipeDialect>();
  stagecraft::pipe::registerPipePasses();
  // MLIR's options, registered here (registerAndParseCLIOptions registers
  // them again, which is a no-op) so that --help can be kept to the passes
  // and the options a pipe user needs.
  mlir::MlirOptMainConfig::registerCLOptions(registry);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  mlir::tracing::DebugCounter::registerCLOptions();
  stagecraft::showOnly({"help", "help-list", "version", "pass-pipeline",
                        "split-input-file", "verify-diagnostics",
                        "mlir-print-debuginfo", "mlir-print-op-on-diagnostic",
                        "mlir-timing", "show-dialects"},
                       {"pipe-"});
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "Stagecraft pipeline schedule optimizer\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(inputFilename, &error);
  if (!file) {
    llvm::errs() << error << "\n";
    return 1;
  }
  {
    mlir::MLIRContext context;
    llvm::SourceMgr sourceMgr;
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    if (mlir::failed(stagecraft::pipe::checkNesting(*file, &context)))
      return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(file), registry, config)))
    return 1;
  output->keep();
  return 0;
}
