//===- Driver.h - A run as stagecraft-run drives it -------------*- C++ -*-===//
//
// The whole of a `stagecraft-run` invocation as library functions, so that
// tests and other front ends call what the tool calls: check the options,
// obtain the plan (a plan file, or a spec compiled through `PlanSource`),
// check memory and durations, run on a backend, report; and `--elastic`,
// the supervisor that re-plans after a lost rank or a straggler.
//
// The runtime never compiles a spec itself (it is free of MLIR and the
// dialect): a front end that accepts specs passes a `PlanSource` whose
// functions compile or profile one.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_DRIVER_H
#define STAGECRAFT_RUNTIME_DRIVER_H

#include "kernels/Model.h"
#include "runtime/Calibrate.h"
#include "runtime/Executor.h"
#include "scheduler/lower/Plan.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::runtime {

/// What stagecraft-run's command line asks for, as plain data (the option
/// of the same name in `stagecraft-run --help` says what each means).
struct DriverOptions {
  /// A spec (`.mlir`) or a plan file (JSON).
  std::string input;
  std::string backend = "local";
  std::string cudaTransport = "auto";
  /// Compile the spec as this kind (`--schedule`); empty: a plan file, or
  /// the schedule written in the spec.
  std::string scheduleKind;
  int chunks = 0;
  /// `--ranks`, `--survivors`, `--speed-factors`: re-planning inputs.
  int ranks = 0;
  std::vector<int> survivors;
  std::vector<double> speedFactors;
  std::string timeUnit = "1ms";
  std::string timeout = "60s";
  std::string maxMemory = "8G";
  std::string tracePath;
  /// The command line, quoted, for the mpirun command a process-count
  /// error prints.
  std::string commandLine;

  // Training with the reference model.
  bool train = false;
  bool reference = false;
  int steps = 1;
  /// --data-parallel: replicas of the pipeline (TrainOptions::replicas).
  int dataParallel = 1;
  /// --rejoin-at (TrainOptions::rejoinAt).
  int rejoinAt = -1;
  /// --sharding: none, full or hybrid (TrainOptions::sharded), and
  /// --shard-group for hybrid (TrainOptions::shardGroup).
  std::string sharding = "none";
  int shardGroup = 0;
  int hidden = 32;
  int heads = 4;
  int sequence = 16;
  /// Whether --seq was given (a spec with lengths(...) refuses it).
  bool sequenceGiven = false;
  int vocab = 64;
  int batch = 2;
  unsigned seed = 1;
  std::string modelCode = "reference";
  std::string optimizer = "sgd";
  float lr = 0.05f;
  std::string dumpGrads;
  std::string dumpWeights;
  std::string checkpointDir;
  int checkpointEvery = 0;
  bool resume = false;
  std::string injectFailure;
  std::string failureStamp;
  std::string injectSlowdown;
  /// --straggler-threshold, when given.
  std::optional<double> stragglerThreshold;
  int stragglerSteps = 3;
  /// --clip-grad-norm, --overlap-steps, --inject-nonfinite
  /// (TrainOptions::clipGradNorm, overlapSteps, nanStage).
  double clipGradNorm = 0.0;
  bool overlapSteps = false;
  std::string injectNonFinite;
  /// --calibrate=FILE: after the run, the spec with the costs the run
  /// measured (runtime/Calibrate.h) written there; empty: none.
  std::string calibrate;
  /// --profile[=FILE]: set (empty: stdout) when given.
  std::optional<std::string> profile;

  // --elastic.
  int maxFailures = 3;
  int maxReplans = 3;
  std::string launcher;

  // Testing: this rank kills itself after this many instructions.
  int killRank = -1;
  int killAfter = 0;
};

/// What a spec is compiled for beyond the spec's own options.
struct PlanRequest {
  /// Empty: the spec's schedule.
  std::string kind;
  int chunks = 0;
  /// 0: the spec's ranks.
  int ranks = 0;
  std::vector<int> survivors;
  std::vector<double> speedFactors;
  int64_t minMessageBytes = 64;
  /// Return the compiler's errors instead of printing them.
  bool quiet = false;
};

/// How a front end turns a spec into plans; the runtime holds no compiler.
struct PlanSource {
  /// Compiles the spec `DriverOptions::input` for the request.
  std::function<llvm::Expected<sched::Plan>(const PlanRequest &)> compile;
  /// `--profile`: measures the spec's stages with \p model for \p steps
  /// steps, computing where \p where puts them, and writes the spec with
  /// measured costs to \p output ("-": stdout).
  std::function<llvm::Error(const kernels::ModelConfig &model, int steps,
                            llvm::StringRef output,
                            const kernels::StageFactory &where)>
      profile;
  /// `--calibrate`: writes the spec with \p calibration's costs to
  /// \p output.
  std::function<llvm::Error(const Calibration &calibration,
                            llvm::StringRef output)>
      calibrate;
};

/// Whether an MPI launcher started several processes.
bool launchedByMpi();

/// Fails when what this process would allocate exceeds \p maxMemory: the
/// plan's slots of the ranks it runs (all of them, or MPI rank \p mpiRank)
/// and, when training, the model those ranks hold.
llvm::Error checkMemory(const sched::Plan &plan, int mpiRank,
                        const TrainOptions *training,
                        llvm::StringRef maxMemory);

/// The plan \p options asks for: the plan file read, or the spec compiled
/// with messages of at least \p minMessageBytes (under mpirun, compiled by
/// rank 0 and broadcast, so that every process runs the same plan).
llvm::Expected<sched::Plan> loadPlan(const DriverOptions &options,
                                     const PlanSource &source,
                                     int64_t minMessageBytes);

/// Runs (or profiles) what \p options asks for as rank \p rank of the
/// backend (0 for local and cuda), prints rank 0's report, and returns the
/// process's exit status: 0, 1 for an error (printed as one line naming
/// rank, stage or action), kExitRankLost or kExitStraggler.
int runDriver(const DriverOptions &options, const PlanSource &source, int rank);

/// `--elastic`: runs attempts as child processes of \p self (this binary)
/// with \p args (the command line after the program name); after each lost
/// rank, re-plans for one rank fewer (compiling the spec through \p source,
/// or taking a plan file's precomputed fallback) and resumes from the last
/// checkpoint; after a straggler, re-plans with the measured speeds.
/// Returns the exit status.
int superviseElastic(const DriverOptions &options, const PlanSource &source,
                     const std::string &self,
                     const std::vector<std::string> &args);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_DRIVER_H
