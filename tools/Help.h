//===- Help.h - Keep a tool's --help to the options it is for ---*- C++ -*-===//
//
// libLLVM.so registers every back-end's command-line options (AArch64,
// AMDGPU, Polly, ...) in each tool that links it. `showOnly` hides all
// registered options but the ones a tool names, so that --help lists the
// tool's own options; the others still work and --help-hidden lists them.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_TOOLS_HELP_H
#define STAGECRAFT_TOOLS_HELP_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace stagecraft {

/// Hides from --help every option registered so far whose name is not in
/// \p names and does not start with one of \p prefixes. Options registered
/// later (a tool's own, constructed when its main runs) stay visible.
inline void showOnly(llvm::ArrayRef<llvm::StringRef> names,
                     llvm::ArrayRef<llvm::StringRef> prefixes) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.getKey();
    llvm::cl::Option *option = entry.getValue();
    bool keep = llvm::is_contained(names, name) ||
                llvm::any_of(prefixes, [&](llvm::StringRef prefix) {
                  return name.starts_with(prefix);
                });
    if (!keep && option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}

} // namespace stagecraft

#endif // STAGECRAFT_TOOLS_HELP_H
