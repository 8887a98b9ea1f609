//===- Runtime.h - Running a plan on a backend ------------------*- C++ -*-===//
//
// Entry points of `stagecraft-run`: run every rank of a plan as a thread
// (`local`) or this process's rank under MPI (`mpi`), then report measured
// busy and wall time beside the simulator's prediction and, optionally,
// write a Chrome trace with the measured and the simulated timeline.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_RUNTIME_H
#define STAGECRAFT_RUNTIME_RUNTIME_H

#include "runtime/Executor.h"

#include <string>

namespace stagecraft::runtime {

struct RunOptions {
  ExecOptions exec;
  /// Seconds without progress on any rank before the run is stopped.
  double timeout = 60.0;
  /// Where to write the Chrome trace; empty for none.
  std::string tracePath;
  /// cuda backend in one process: "copy" (device-to-device and peer copies
  /// ordered by events), "nccl" (NCCL send / receive, every rank on a GPU
  /// of its own) or "auto" (nccl when ranks fit the GPUs and NCCL is built).
  std::string cudaTransport = "auto";
  /// The command that started this run (argv, shell-quoted), so that a
  /// process-count error can print the mpirun command that would work.
  std::string commandLine;
};

struct RunReport {
  std::vector<RankResult> ranks;
  /// Longest rank wall time, in seconds.
  double wall = 0.0;
  /// Training: the mean loss of every step from 0; those before
  /// `firstStep` come from the checkpoint resumed from.
  std::vector<double> losses;
  int firstStep = 0;
  /// Resumed: the longest any rank took to load and restore the checkpoint
  /// (negative: not resumed).
  double resumeSeconds = -1.0;
  /// Training stopped at the checkpoint after this many steps because of
  /// `stragglers` (-1: every step ran).
  int stoppedAt = -1;
  std::vector<Straggler> stragglers;
  /// Training: when each step ended on the last rank to end it, seconds
  /// from the common start; the steps rolled back (--overlap-steps) and
  /// those skipped for a non-finite gradient.
  std::vector<double> stepEnds;
  int rollbacks = 0, skippedSteps = 0;
  /// Replicas (local): the replica whose ranks the report shows (the first
  /// that trained to the end), the replicas that left (their number and
  /// the failure), and the steps run again without them, with how many
  /// replicas trained each then, and the steps from which restarted
  /// replicas trained again (--rejoin-at).
  int reportingReplica = 0;
  std::vector<std::pair<int, std::string>> departures;
  std::vector<MembershipChange> membershipChanges;
};

/// Runs all ranks as threads of this process.
llvm::Expected<RunReport> runLocal(const sched::Plan &plan,
                                   const RunOptions &options);

#ifdef STAGECRAFT_HAVE_MPI
/// Runs this process's rank; the report (complete on rank 0 only) gathers
/// every rank's results. MPI must be initialized; a size different from the
/// plan's ranks fails on every rank.
llvm::Expected<RunReport> runMpi(const sched::Plan &plan,
                                 const RunOptions &options);

/// The time origin of every process's measurements (collective): after a
/// barrier, rank 0's clock reading when every process runs on one host
/// (one monotonic clock), else each process's own.
Clock::time_point commonStart();

/// Every process's result gathered on rank 0 (collective): the whole
/// report there (its first \p keepRanks ranks, all when negative: replica
/// 0's), this process's own result elsewhere.
RunReport gatherMpiReport(RankResult mine, int keepRanks = -1);
#endif

#ifdef STAGECRAFT_HAVE_CUDA
/// Runs every rank as a thread of this process on the CUDA devices it sees,
/// rank r on device r mod (device count), so ranks may share one GPU: per
/// rank a compute and a communication stream, slots in device memory, the
/// timed kernel as a spin kernel or, when training, the device model
/// (kernels/cuda), transfers as device-to-device or peer copies ordered by
/// CUDA events. Fails clearly without a device.
llvm::Expected<RunReport> runCuda(const sched::Plan &plan,
                                  const RunOptions &options);

#if defined(STAGECRAFT_HAVE_MPI) && defined(STAGECRAFT_HAVE_NCCL)
/// One rank per process under mpirun, on the GPU of its local rank: the
/// same as runCuda, with transfers as ncclSend / ncclRecv (grouped ops in
/// ncclGroupStart / End) over one communicator created at start from a
/// unique id broadcast over MPI. The report is complete on rank 0.
llvm::Expected<RunReport> runCudaMpi(const sched::Plan &plan,
                                     const RunOptions &options);
#endif

/// Calls \p fn with layer-wise stages on CUDA device 0 issuing on a stream
/// of their own (for the sequential reference and profiling on a GPU);
/// fails clearly without a device.
llvm::Error withCudaStages(
    llvm::function_ref<llvm::Error(const kernels::StageFactory &)> fn);
#endif

/// Runs \p rank(r) for every rank r in a thread of its own; the report of
/// their results, or one error: the ranks that failed first, not those
/// stopped because of them.
llvm::Expected<RunReport>
runRankThreads(int ranks,
               llvm::function_ref<llvm::Expected<RankResult>(int)> rank);

/// Training only: the sequential reference. All stages in one thread, the
/// microbatches one after another (F through the stages, then I and W back),
/// with the same data, optimizer and dumps as a pipelined run; layer-wise
/// stages computing where \p where puts them (the host by default).
llvm::Expected<RunReport>
runReference(const sched::Plan &plan, const TrainOptions &train,
             const kernels::StageFactory &where = kernels::hostStages());

/// The table of measured against simulated figures.
std::string formatRunReport(const sched::Plan &plan, const RunReport &report,
                            const RunOptions &options, llvm::StringRef backend);

/// Writes the measured and simulated timelines side by side.
llvm::Error writeRunTrace(const sched::Plan &plan, const RunReport &report,
                          const RunOptions &options);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_RUNTIME_H
