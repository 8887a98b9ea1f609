//===- Library.cpp - The policies shipped with Stagecraft -----------------===//

#include "scheduler/policy/Library.h"

#include "llvm/Support/ErrorHandling.h"

#include <string>
#include <utility>

using namespace stagecraft::pipe::sched;

const std::vector<Policy> &stagecraft::pipe::sched::libraryPolicies() {
  static const std::vector<Policy> policies = [] {
    static const std::pair<const char *, const char *> texts[] = {
#include "PolicyLibrary.inc"
    };
    std::vector<Policy> out;
    for (const auto &[file, text] : texts) {
      llvm::Expected<Policy> p = parsePolicy(text);
      // The policy tests parse every file of the library.
      if (!p)
        llvm::report_fatal_error(llvm::Twine("library policy ") + file + ": " +
                                 llvm::toString(p.takeError()));
      out.push_back(std::move(*p));
    }
    return out;
  }();
  return policies;
}

const Policy *stagecraft::pipe::sched::libraryPolicy(llvm::StringRef name) {
  for (const Policy &p : libraryPolicies())
    if (p.name == name)
      return &p;
  return nullptr;
}
