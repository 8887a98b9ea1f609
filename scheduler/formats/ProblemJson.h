//===- ProblemJson.h - A problem as JSON, without MLIR -----------*- C++
//-*-===//
//
// `{"format": "stagecraft-problem", "version": 1, ...}`: every field of a
// Problem, written and read back exactly (doubles in their shortest
// round-trip form). It carries a spec's pipeline to code that has no MLIR:
// `stagecraft-translate --pipe-to-problem` writes it from a `.mlir` spec and
// the Python wheel's `sc.load` reads it.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_FORMATS_PROBLEMJSON_H
#define STAGECRAFT_SCHEDULER_FORMATS_PROBLEMJSON_H

#include "scheduler/model/DataParallel.h"
#include "scheduler/model/Problem.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace stagecraft::pipe::sched {

/// Writes \p problem as one JSON object, with \p dp (the data parallelism
/// around it) under "data_parallel" when given.
void writeProblemJson(llvm::raw_ostream &os, const Problem &problem,
                      const DataParallel *dp = nullptr);

/// Reads what writeProblemJson wrote; an unknown key, a missing one or a
/// value of the wrong type is an error naming it. The result is validated
/// (validateProblem, and validateDataParallel for its data parallelism,
/// which goes to \p dp when given: nullopt when the file has none).
llvm::Expected<Problem>
readProblemJson(llvm::StringRef text,
                std::optional<DataParallel> *dp = nullptr);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_FORMATS_PROBLEMJSON_H
