//===- PipeParse.cpp - Parsing pipe IR from untrusted files ---------------===//

#include "dialect/PipeParse.h"

#include "scheduler/model/Nesting.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/FileSystem.h"

using namespace mlir;

LogicalResult stagecraft::pipe::checkNesting(const llvm::MemoryBuffer &buffer,
                                             MLIRContext *context) {
  std::optional<sched::DeepNesting> deep =
      sched::findDeepNesting(buffer.getBuffer(), /*mlirSyntax=*/true);
  if (!deep)
    return success();
  return emitError(FileLineColLoc::get(context, buffer.getBufferIdentifier(),
                                       deep->line, deep->column))
         << "brackets nested deeper than " << sched::kMaxNesting
         << " levels; refused before parsing";
}

OwningOpRef<ModuleOp>
stagecraft::pipe::parsePipeSource(llvm::SourceMgr &sourceMgr,
                                  MLIRContext *context) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  if (failed(checkNesting(*buffer, context)))
    return nullptr;
  return parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(context));
}

OwningOpRef<ModuleOp> stagecraft::pipe::parsePipeFile(
    llvm::StringRef path, llvm::SourceMgr &sourceMgr, MLIRContext *context) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!file) {
    emitError(UnknownLoc::get(context))
        << "cannot open " << path << ": " << file.getError().message();
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  return parsePipeSource(sourceMgr, context);
}
