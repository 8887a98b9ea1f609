//===- PlanCompiler.h - From pipe IR to a runtime plan ----------*- C++ -*-===//
//
// Used by `stagecraft-run`: compiles a spec file, scheduled with a kind or
// holding a schedule, straight to a runtime plan (`planFromSchedule`).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_TRANSLATE_PLANCOMPILER_H
#define STAGECRAFT_TRANSLATE_PLANCOMPILER_H

#include "passes/ScheduleLookup.h"

#include "kernels/Model.h"
#include "scheduler/lower/Plan.h"

#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe {

struct CompileOptions {
  /// Schedule kind for --pipe-schedule; empty: use the schedule in the file.
  std::string kind;
  int chunks = 0;
  double memoryLimit = 0.0;
  /// --pipe-schedule's recompute= (empty: its default).
  std::string recompute;
  /// --pipe-schedule's objective=: makespan or span.
  std::string objective = "makespan";
  /// When > 0: schedule the spec's pipelines on this many ranks instead of
  /// their own count (re-planning on the surviving ranks).
  int ranks = 0;
  /// With `ranks`: which of the spec's ranks remain, in order, so that a
  /// pipeline with devices(...) keeps the survivors' devices; needed there,
  /// ignored without devices.
  std::vector<int> survivors;
  /// One factor per rank (after `ranks` and `survivors`) multiplying its
  /// device's speed (a straggler's measured speed); empty: none.
  std::vector<double> speedFactors;
  double timeLimit = 10.0;
  /// Which schedule, when the file holds several.
  std::string scheduleName;
  int64_t unitBytes = 4096;
  /// Smallest activation and gradient message buffer (training payloads).
  int64_t minMessageBytes = 64;
  /// For a layer pipeline: --pipe-partition's stages= (empty: auto, one
  /// stage per rank).
  std::string partitionStages;
  /// Put the errors the compiler reports into the returned error instead
  /// of printing them (a supervisor that tries several kinds).
  bool quiet = false;
};

/// Parses \p path, schedules it if \p options.kind is set, and builds the
/// plan. MLIR diagnostics go to stderr; the error then says what failed.
llvm::Expected<sched::Plan> compileSpecFile(llvm::StringRef path,
                                            const CompileOptions &options);

/// The same on a parsed module (changed in place: the ranks, the schedule
/// added); \p what names it in errors. Its diagnostics go to the context's
/// handler.
llvm::Expected<sched::Plan> compileModule(mlir::ModuleOp module,
                                          const CompileOptions &options,
                                          llvm::StringRef what);

/// Costs measured for each stage of a spec's pipeline, in milliseconds.
struct MeasuredCosts {
  std::vector<double> forward, backwardInput, backwardWeight;
  /// A fused backward measured where I and W were not: split in the ratio
  /// of the spec's own I and W costs (half each when both are 0).
  std::vector<double> backward;
  /// The link latency measured, when it was.
  std::optional<double> latency;
};

/// Writes the spec at \p path to \p output ("-": stdout) with its
/// pipeline's stage costs (and latency) replaced by \p costs, after the
/// comment line \p header. Fails when the spec does not hold exactly one
/// pipeline with as many stages as \p costs.
llvm::Error writeSpecWithCosts(llvm::StringRef path, const MeasuredCosts &costs,
                               llvm::StringRef header, llvm::StringRef output);

/// Measures F, I and W of every stage of the spec at \p path with the
/// reference model (\p model sizes, \p steps timed steps after one warm-up
/// step, sequentially on this thread, the stages computing where \p where
/// puts them: the host, or a GPU) and writes the spec to \p output with
/// each stage's `cost(...)` replaced by the measured milliseconds, so that
/// `--pipe-schedule` (and `auto`) schedule from real costs.
llvm::Error
profileSpecFile(llvm::StringRef path, const kernels::ModelConfig &model,
                int steps, llvm::StringRef output,
                const kernels::StageFactory &where = kernels::hostStages());

} // namespace stagecraft::pipe

#endif // STAGECRAFT_TRANSLATE_PLANCOMPILER_H
