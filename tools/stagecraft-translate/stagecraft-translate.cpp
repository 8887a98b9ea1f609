//===- stagecraft-translate.cpp - The pipe translation driver -------------===//
//
// mlir-translate for `pipe` IR: registers the translations to and from the
// PyTorch CSV, the Chrome trace and the text summary.
//
//===----------------------------------------------------------------------===//

#include "translate/Translations.h"

#include "mlir/Support/LogicalResult.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  stagecraft::pipe::registerPipeTranslations();
  return mlir::failed(mlir::mlirTranslateMain(
             argc, argv, "Stagecraft pipeline schedule translator\n"))
             ? 1
             : 0;
}
