//===- PipeParse.h - Parsing pipe IR from untrusted files -------*- C++ -*-===//
//
// Every tool reads `pipe` IR through these: the text is first checked for
// bracket nesting beyond sched::kMaxNesting (MLIR's parser recurses per
// level and would overflow the stack), with a located error, and only then
// handed to MLIR's parser.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEPARSE_H
#define STAGECRAFT_DIALECT_PIPEPARSE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

namespace stagecraft::pipe {

/// Emits an error at the first bracket of \p buffer nested too deeply.
mlir::LogicalResult checkNesting(const llvm::MemoryBuffer &buffer,
                                 mlir::MLIRContext *context);

/// Parses the main buffer of \p sourceMgr after `checkNesting`.
mlir::OwningOpRef<mlir::ModuleOp> parsePipeSource(llvm::SourceMgr &sourceMgr,
                                                  mlir::MLIRContext *context);

/// Reads \p path into \p sourceMgr and parses it with `parsePipeSource`;
/// errors (unreadable file included) go to the context's handler.
mlir::OwningOpRef<mlir::ModuleOp> parsePipeFile(llvm::StringRef path,
                                                llvm::SourceMgr &sourceMgr,
                                                mlir::MLIRContext *context);

} // namespace stagecraft::pipe

#endif // STAGECRAFT_DIALECT_PIPEPARSE_H
