//===- stagecraft-translate.cpp - The pipe translation driver -------------===//
//
// mlir-translate for `pipe` IR: registers the translations to and from the
// PyTorch CSV, the Chrome trace and the text summary.
//
//===----------------------------------------------------------------------===//

#include "tools/Help.h"
#include "tools/Version.h"
#include "translate/Translations.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "mlir/Support/Timing.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

#include "llvm/ADT/StringRef.h"

int main(int argc, char **argv) {
  stagecraft::pipe::registerPipeTranslations();
  stagecraft::addVersionPrinter();
  // MLIR's options, registered here (mlirTranslateMain registers them again,
  // a no-op) so that --help can be kept to the translations and their
  // options; the rest stay usable and --help-hidden lists them.
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerTranslationCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  stagecraft::showOnly({"help", "help-list", "version", "schedule-name",
                        "pipeline-name", "unit-bytes", "message-bytes",
                        "timeline-width", "mlir-print-debuginfo",
                        "mlir-print-op-on-diagnostic"},
                       {"pipe-"});
  // A diagnostic is one located line (and its notes), not a dump of the
  // operation in generic form, unless the user asks for it.
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (arg.contains("mlir-print-op-on-diagnostic"))
      stagecraft::pipe::setPrintOpOnDiagnostic(!arg.ends_with("=false") &&
                                               !arg.ends_with("=0"));
  }
  return mlir::failed(mlir::mlirTranslateMain(
             argc, argv, "Stagecraft pipeline schedule translator\n"))
             ? 1
             : 0;
}
