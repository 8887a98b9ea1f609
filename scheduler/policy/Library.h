//===- Library.h - The policies shipped with Stagecraft ---------*- C++ -*-===//
//
// The library of policies in examples/policies, compiled in: auto's policy
// candidates, and the names `--pipe-schedule="policy=NAME"` resolves when
// the module holds no such op.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_POLICY_LIBRARY_H
#define STAGECRAFT_SCHEDULER_POLICY_LIBRARY_H

#include "scheduler/policy/Policy.h"

#include <vector>

namespace stagecraft::pipe::sched {

/// The library's policies, parsed once, by file name order.
const std::vector<Policy> &libraryPolicies();

/// The library policy named \p name, or null.
const Policy *libraryPolicy(llvm::StringRef name);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_POLICY_LIBRARY_H
