//===- RunOptions.h - stagecraft-run's command line -------------*- C++ -*-===//
//
// Parses stagecraft-run's options (`stagecraft-run --help`) into what the
// runtime's driver runs and how a spec is compiled.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_TOOLS_STAGECRAFT_RUN_RUNOPTIONS_H
#define STAGECRAFT_TOOLS_STAGECRAFT_RUN_RUNOPTIONS_H

#include "runtime/Driver.h"
#include "translate/PlanCompiler.h"

namespace stagecraft {

struct RunCommandLine {
  runtime::DriverOptions run;
  /// The spec compiler's options; a PlanRequest overrides its kind, chunks,
  /// ranks, survivors, speed factors and message size.
  pipe::CompileOptions compile;
  bool elastic = false;
};

/// Parses the command line (exits on --help, --version or a malformed one).
RunCommandLine parseRunCommandLine(int argc, char **argv);

} // namespace stagecraft

#endif // STAGECRAFT_TOOLS_STAGECRAFT_RUN_RUNOPTIONS_H
