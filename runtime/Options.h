//===- Options.h - Checked parsing of stagecraft-run's options --*- C++ -*-===//
//
// The values a user types into `stagecraft-run` that turn into sizes and
// durations: parsed and range-checked here, in one place the fuzz target
// also drives, so that no typo reaches an allocation or a sleep unchecked.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_OPTIONS_H
#define STAGECRAFT_RUNTIME_OPTIONS_H

#include "runtime/Executor.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace stagecraft::runtime {

/// The longest --time-unit, --timeout or timed compute accepted (a day).
constexpr double kMaxDurationSeconds = 86400.0;

/// Seconds in "2ms", "250us", "1.5s" or a plain number of seconds. Fails,
/// naming `--<what>=<text>`, unless finite, positive and at most a day.
llvm::Expected<double> parseDuration(llvm::StringRef text,
                                     llvm::StringRef what);

/// Bytes in "8G", "512M", "4096" (binary suffixes K, M, G, T). Fails unless
/// finite and positive.
llvm::Expected<double> parseBytes(llvm::StringRef text, llvm::StringRef what);

/// Checks the training options: sizes (ModelConfig::validate), steps >= 1,
/// a finite non-negative learning rate, a known optimizer.
llvm::Error checkTrainOptions(const TrainOptions &train);

/// The mpirun command that runs \p command (a stagecraft-run command line)
/// on \p ranks processes here: with --allow-run-as-root when this process
/// runs as root and --oversubscribe when the machine has fewer cores than
/// \p ranks (Open MPI refuses both otherwise).
std::string mpirunCommand(int ranks, llvm::StringRef command);

/// "the plan has R ranks but S MPI processes run it; launch with: <the
/// mpirunCommand>".
std::string processCountError(int ranks, int size, llvm::StringRef command);

/// \p argv shell-quoted and joined: the command as a user would retype it.
std::string quoteCommandLine(int argc, const char *const *argv);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_OPTIONS_H
