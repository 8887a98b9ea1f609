//===- Executor.h - Runs one rank of a plan ---------------------*- C++ -*-===//
//
// Walks a rank's instruction stream: computes run the timed synthetic kernel
// (sleep for cost x time unit; ranks may outnumber cores) and check the tags
// of the buffers they read and write the tags of those they produce, so a
// plan that reuses a slot too early is caught, naming rank, action and slot;
// sends and receives go through the communicator (a send from a copy of its
// buffer, so it never blocks the stream); a group posts its operations and
// waits for its receives; free releases a slot. The verifier assumes NCCL's
// stricter semantics (a grouped send waits for its receive), so every plan
// it accepts runs here.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_EXECUTOR_H
#define STAGECRAFT_RUNTIME_EXECUTOR_H

#include "runtime/Communicator.h"
#include "runtime/DataParallel.h"

#include "kernels/HelixModel.h"
#include "kernels/Model.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include "scheduler/lower/Plan.h"
#include <functional>
#include <map>
#include <memory>

namespace stagecraft::runtime {

namespace sched = ::stagecraft::pipe::sched;
class ReplicaSet;

/// Training with the reference model instead of the timed kernel.
struct TrainOptions {
  kernels::ModelConfig model;
  kernels::OptimizerConfig optimizer;
  int steps = 1;
  /// Directories to write each stage's gradients after the first step and
  /// weights after the last (float32, parameters in order); empty: none.
  std::string dumpGrads, dumpWeights;
  /// On the host: the device model on the host device (the code the cuda
  /// backend trains with) instead of the reference stages.
  bool deviceModel = false;
  /// Checkpoints (runtime/Checkpoint.h) into this folder every
  /// `checkpointEvery` steps and after the last; empty: none.
  std::string checkpointDir;
  int checkpointEvery = 0;
  /// Start from the newest valid checkpoint in `checkpointDir`; `steps`
  /// stays the total.
  bool resume = false;
  /// Fault injection for tests (--inject-failure=RANK:STEP[:MODE]): rank
  /// `injectRank` dies (kill: on mpi the process SIGKILLs itself, on local
  /// its thread fails) or stops making progress (hang) at the start of step
  /// `injectStep`, or dies while writing the checkpoint taken once
  /// `injectStep` steps are done (checkpoint: after its own files, before
  /// the checkpoint is complete). Negative rank: none.
  enum class Inject { Kill, Hang, Checkpoint };
  int injectRank = -1, injectStep = 0;
  Inject inject = Inject::Kill;
  /// When the injected failure fires, the rank writes the wall-clock time
  /// (seconds since the epoch) into this file first, so that a supervisor
  /// can tell how long detecting it took; empty: none.
  std::string failureStamp;
  /// Stragglers (--straggler-threshold): at each checkpoint, a rank whose
  /// measured compute time per simulated unit exceeded the reference rank's
  /// (the lower median over ranks) by more than this factor in each of the
  /// last `stragglerSteps` steps stops the run there, so that it is
  /// re-planned with that rank's measured speed; 0: off.
  double stragglerThreshold = 0.0;
  int stragglerSteps = 3;
  /// Fault injection for tests (--inject-slowdown=RANK:STEP:FACTOR): from
  /// step `slowStep`, every compute of rank `slowRank` (numbered as in the
  /// first attempt, see `identity`) takes `slowFactor` times as long.
  /// Negative rank: none.
  int slowRank = -1, slowStep = 0;
  double slowFactor = 1.0;
  /// The first attempt's number of each rank (--survivors); empty: the
  /// ranks are their own numbers.
  std::vector<int> identity;
  /// The global checks of every step's gradients (all ranks' together):
  /// clip to this global L2 norm (torch's clip_grad_norm_; 0: no clipping),
  /// and skip the update of a step whose gradients are non-finite anywhere.
  double clipGradNorm = 0.0;
  /// --overlap-steps: no barrier between steps. Each rank applies its update
  /// after its own last W of a step and goes on to the next step; the
  /// global checks of step k are validated after the fact, at the end of
  /// step k+1, and when they fail (clipping applies, or a gradient is
  /// non-finite) every rank rolls step k's update back, applies the checked
  /// one, and runs step k+1 again. Losses and weights are bitwise those of
  /// the run without overlap.
  bool overlapSteps = false;
  /// Fault injection for tests (--inject-nonfinite=STAGE:STEP): stage
  /// `nanStage`'s first gradient element becomes NaN at step `nanStep`
  /// (each time that step runs, as its data would). Negative stage: none.
  int nanStage = -1, nanStep = 0;
  /// --data-parallel: replicas of the pipeline (runtime/DataParallel.h),
  /// each on its own m microbatches of the step's replicas x m.
  int replicas = 1;
  /// --sharding=full: each replica keeps 1/replicas of every stage's
  /// weights and AdamW moments between steps, gathers the weights before
  /// the stage's first action of a step, reduce-scatters its gradients
  /// after its last and updates its own slice (FSDP / ZeRO-3).
  bool sharded = false;
  /// --sharding=hybrid --shard-group=G: the replicas in groups of G
  /// consecutive ones, each group sharded as above within itself, the
  /// gradients reduce-scattered within the group and then all-reduced
  /// across the groups (HSDP); 0: one group of every replica. The mean sums
  /// within each group in replica order, then the groups' sums in group
  /// order (meanOverReplicas), with or without sharding.
  int shardGroup = 0;
  /// --rejoin-at (testing, local): the replica of the injected failure is
  /// restarted and trains again from this step (-1: it stays out).
  int rejoinAt = -1;
};

/// Parses --inject-nonfinite's STAGE:STEP into \p train.
llvm::Error parseInjectedNonFinite(llvm::StringRef text, TrainOptions &train);

/// Parses --inject-slowdown's RANK:STEP:FACTOR into \p train.
llvm::Error parseInjectedSlowdown(llvm::StringRef text, TrainOptions &train);

/// A rank found straggling at a checkpoint (TrainOptions::stragglerThreshold).
struct Straggler {
  int rank = 0;
  /// Its measured time per simulated unit over the reference rank's, the
  /// median of the steps that flagged it.
  double ratio = 1.0;
  /// The speed it showed, as a factor of the speed it was planned with
  /// (1 / ratio): the supervisor re-plans with it.
  double speedFactor = 1.0;
  /// The steps that flagged it, first and last.
  int firstStep = 0, lastStep = 0;
};

/// The ranks whose compute seconds per simulated unit (\p rates[r][i], the
/// last steps before the checkpoint after \p done steps, oldest first;
/// NaN: not judged) exceed the reference, the lower median over ranks, by
/// more than \p threshold in every one of those steps. None when a step is
/// not judged on some rank.
std::vector<Straggler>
findStragglers(const std::vector<std::vector<double>> &rates, double threshold,
               int done);

/// Exit status of stagecraft-run when training stopped at a checkpoint
/// because a rank straggles: re-plan with the measured speeds it printed
/// (`--speed-factors`) and resume.
constexpr int kExitStraggler = 76;
/// Every line naming a straggler starts with this.
constexpr const char *kStragglerPrefix = "straggler: ";

/// The straggler line: "straggler: rank R (...) ran X.XXx ...; its measured
/// speed is F of the planned one; ..." (what the supervisor reads back).
std::string describeStraggler(const Straggler &s, int stoppedAt,
                              llvm::ArrayRef<int> identity);

/// Parses --inject-failure's RANK:STEP[:kill|hang|checkpoint] into \p train.
llvm::Error parseInjectedFailure(llvm::StringRef text, TrainOptions &train);

/// Exit status of stagecraft-run when a rank was lost (died or stopped
/// making progress): the job can be re-planned on the surviving ranks and
/// resumed from its last checkpoint. Bad input and bugs exit with 1.
constexpr int kExitRankLost = 75;
/// Every message of a lost rank starts with this.
constexpr const char *kRankLostPrefix = "rank lost: ";

/// The host stages \p train asks for: the reference, or the device model.
kernels::StageFactory hostStagesFor(const TrainOptions &train);

struct ExecOptions {
  /// Seconds per schedule time unit.
  double timeUnit = 1e-3;
  /// When set, computes run the reference model for this many steps.
  const TrainOptions *train = nullptr;
  /// Fault injection for tests: after this many instructions, the rank
  /// kills itself (SIGKILL). Negative: never.
  int killAfter = -1;
  /// Ranks are threads of this process (local): an injected failure fails
  /// the thread instead of killing the process.
  bool ranksAreThreads = false;
  /// Training with replicas (TrainOptions::replicas): this rank's replica
  /// and its data-parallel group (this rank of every replica, in replica
  /// order); the progress monitor's index of this rank among all replicas'.
  int replica = 0;
  Communicator *replicaGroup = nullptr;
  int watchIndex = -1;
  /// Local replicas that go on when one fails (runtime/DataParallel.h);
  /// null: a failed replica ends the run.
  ReplicaSet *membership = nullptr;
  /// A restarted replica's rank: it trains again from this step, with the
  /// weights and optimizer state of a replica still there (-1: none).
  int joinAt = -1;
};

struct MeasuredAction {
  int index;         // position among the rank's computes
  double start, end; // seconds since the common start
};

struct RankResult {
  int rank = 0;
  double busy = 0.0;    // seconds in compute
  double wall = 0.0;    // seconds from the common start to the last op
  double waiting = 0.0; // seconds blocked in communication
  size_t instructions = 0;
  double overhead = 0.0; // seconds neither computing nor waiting
  /// Training with replicas: seconds in the rank's reduce-waits, completing
  /// its stages' gradient reductions (and, hybrid, the all-reduce across
  /// shard groups) after its last action: the data-parallel time the step
  /// exposes on this rank.
  double dataParallelExposed = 0.0;
  std::vector<MeasuredAction> actions;
  /// Training: per step, the mean loss over microbatches (0 on ranks that
  /// do not host the last stage).
  std::vector<double> losses;
  /// Training: the step the losses start at (the checkpoint's, when
  /// resumed).
  int firstStep = 0;
  /// Training, resumed: seconds loading, validating and restoring the
  /// checkpoint took on this rank (negative: not resumed).
  double resumeSeconds = -1.0;
  /// Training with layer-wise host stages: the most activation bytes the
  /// rank's stages held at once (kernels::ActivationBytes); -1 otherwise.
  int64_t activationPeak = -1;
  /// Training stopped early at the checkpoint after this many steps
  /// because of stragglers (-1: it ran every step).
  int stoppedAt = -1;
  /// Rank 0: the stragglers that stopped it.
  std::vector<Straggler> stragglers;
  /// Training: when each step ended, seconds from the common start.
  std::vector<double> stepEnds;
  /// Training: steps rolled back (--overlap-steps) and steps skipped for a
  /// non-finite gradient.
  int rollbacks = 0, skippedSteps = 0;
  /// Training with replicas that go on after a failure, or that rejoin:
  /// each change in which replicas train, in step order.
  std::vector<MembershipChange> membershipChanges;
};

/// Training: per rank, the activation peak in bytes that \p plan's order
/// and recomputation imply for the reference model \p model (the plan's
/// accounting with kernels::activationBytes as each stage's memory); empty
/// for helix plans or stages without layers.
std::vector<double> plannedActivationPeaks(const sched::Plan &plan,
                                           const kernels::ModelConfig &model);

/// Bytes a message slot needs for the model: the largest message (Q, K and
/// V: 3 x tokens x hidden floats) plus room for the tags around it.
int64_t trainingMessageBytes(const kernels::ModelConfig &model);

/// A branching plan's model (plan.stageInputs): the reference model's
/// pieces joined as a graph. Each source stage embeds its own tokens
/// (`--seq` of them per sequence, its own embedding table: an image branch
/// embeds patch codes, a text branch words); a stage with several inputs
/// takes their outputs concatenated along the sequence, in input order;
/// the last stage's head and loss cover its whole sequence. Branches are
/// chains of stages with their own parameters (names prefixed `b<k>.`,
/// seeds apart) and layer numbers.
struct StageGraph {
  std::vector<std::vector<int>> inputs, consumers;
  /// Each stage's sequence length (its input's, and its output's).
  std::vector<int> sequence;
  std::vector<int> branch, firstLayer;
  /// Empty: the plan is a chain.
  bool empty() const { return inputs.empty(); }
  int longest() const;
};
StageGraph stageGraph(const sched::Plan &plan, int sequence);

/// The input of stage \p s of \p graph for one microbatch (batch rows of
/// sequence x hidden floats): its inputs' outputs (\p outputOf) side by
/// side along the sequence, into \p scratch; the input's own buffer when
/// there is one input, null for a source.
const float *gatherInput(const StageGraph &graph, int s, int batch, int hidden,
                         llvm::function_ref<const float *(int)> outputOf,
                         std::vector<float> &scratch);
/// The gradient of stage \p s's output: the sum over its consumers c of
/// c's slice for s of c's input gradient (\p gradientOf(c)), into
/// \p scratch (null for the last stage).
const float *
gatherOutputGradient(const StageGraph &graph, int s, int batch, int hidden,
                     llvm::function_ref<const float *(int)> gradientOf,
                     std::vector<float> &scratch);

/// The model pieces of a rank: per stage, a layer-wise Stage or, for a
/// HelixPipe plan (attention after the stages), a HelixBlock.
struct RankModels {
  std::vector<std::pair<int, std::unique_ptr<kernels::StageModel>>> all;
  std::map<int, kernels::LayerStage *> stages;
  std::map<int, kernels::HelixBlock *> blocks;
  /// What the rank's layer-wise stages hold; `metered` when every one of
  /// them reports to it.
  std::shared_ptr<kernels::ActivationMeter> meter =
      std::make_shared<kernels::ActivationMeter>();
  bool metered = false;
  /// A branching plan's graph (empty for a chain).
  StageGraph graph;
  int batch = 1, hidden = 1;
  std::vector<float> inputScratch, gradientScratch;
};

/// Builds the models of \p rank's stages (all stages when \p rank < 0),
/// layer-wise stages by \p where (helix blocks are host only).
llvm::Expected<RankModels>
buildStages(const sched::Plan &plan, int rank, const TrainOptions &train,
            const kernels::StageFactory &where = kernels::hostStages());

/// Where a training message starts in its slot (tags may sit before it).
constexpr size_t kTrainingPayloadOffset = 64;

/// Fails unless every message buffer of \p rank holds the model's largest
/// message, saying how to build a plan whose buffers do.
llvm::Error checkTrainingBuffers(const sched::Plan &plan, int rank,
                                 const kernels::ModelConfig &model);

/// The message of \p kind produced by \p stage among \p uses (located by
/// their tags), through \p payload; null when there is none.
float *findMessage(const std::vector<sched::SlotUse> &uses,
                   sched::BufferKind kind, int stage,
                   llvm::function_ref<float *(const sched::SlotUse &)> payload);

/// Runs the compute \p op of a layer-wise plan on \p models, reading and
/// writing the messages \p payload locates (by the buffers' tags). Fails
/// for attention tasks, which need helix blocks.
llvm::Error
runLayerCompute(const sched::PlanOp &op, RankModels &models,
                llvm::function_ref<float *(const sched::SlotUse &)> payload);

/// The training loop around one pass over the microbatches: per step, sets
/// the step and clears gradients, runs \p pass, records the mean loss (when
/// \p stages include the last stage), dumps gradients after the first step
/// and weights after the last, and applies the optimizer.
/// What the training loop needs to checkpoint and resume across ranks.
struct TrainHooks {
  /// Set to the first step run (the checkpoint's when resuming).
  int *firstStep = nullptr;
  /// This process's rank, of `ranks`, among the checkpoint writers.
  int rank = 0, ranks = 1;
  /// Returns once every writer has written its part (none: one writer):
  /// true when the run is to stop at this checkpoint (a straggler).
  std::function<llvm::Expected<bool>(int done)> barrier;
  /// Set to the steps done when training stopped early (stragglers).
  int *stoppedAt = nullptr;
  /// Called at the start of each step (may be empty).
  std::function<llvm::Error(int step)> atStep;
  /// Called once this writer's part of the checkpoint after \p done steps
  /// is written, before the barrier (may be empty).
  std::function<llvm::Error(int done)> atCheckpoint;
  /// Set to the seconds loading and restoring the checkpoint took.
  double *resumeSeconds = nullptr;
  /// The exchange of each step's gradient checks among the ranks (none:
  /// this process holds every stage, its checks are the global ones):
  /// `postChecks` starts sending this rank's values of step \p step to
  /// every rank and receiving theirs; `finishChecks` waits for them and
  /// returns every rank's values, in rank order.
  std::function<llvm::Error(int step, const std::vector<double> &mine)>
      postChecks;
  std::function<llvm::Expected<std::vector<double>>(int step)> finishChecks;
  /// Set to when each step ended (seconds from the run's start; a step run
  /// again after a rollback: its last end).
  std::vector<double> *stepEnds = nullptr;
  std::function<double()> now;
  /// Set to the steps rolled back (--overlap-steps) and the steps whose
  /// update was skipped for a non-finite gradient.
  int *rollbacks = nullptr, *skippedSteps = nullptr;
  /// Data parallelism: the step's loss over every replica from this
  /// replica's (none: this is the only one).
  std::function<llvm::Expected<double>(double mine)> reduceLoss;
  /// Whether this replica writes checkpoints and dumps (the first of
  /// those training; the others hold the same weights). Empty: it does.
  std::function<bool()> writes;
  /// Called after each step's pass: true when the step is to run again
  /// (replicas left during it; its gradients are dropped).
  std::function<llvm::Expected<bool>(int step)> stepAgain;
  /// Sharded data parallelism: updates stage \p index's own slice (empty:
  /// the model's whole update), and makes every stage whole on every
  /// replica (\p whole: before dumps and checkpoints) or sharded again.
  std::function<void(kernels::StageModel &model, int index)> update;
  std::function<llvm::Error(bool whole)> materialize;
  /// A replica that joins a run under way starts at this step, its state
  /// already taken from a peer (-1: from 0 or the checkpoint).
  int startStep = -1;
};

llvm::Error trainSteps(const sched::Plan &plan, RankModels &models,
                       const TrainOptions &train,
                       llvm::function_ref<llvm::Error()> pass,
                       std::vector<double> &losses,
                       const TrainHooks &hooks = {});

/// Runs rank \p rank of \p plan. \p start is the common time origin.
/// Fails with a one-line message naming rank, instruction and action.
llvm::Expected<RankResult> executeRank(const sched::Plan &plan, int rank,
                                       Communicator &comm,
                                       ProgressMonitor &monitor,
                                       Clock::time_point start,
                                       const ExecOptions &options);

/// "forward @s1 mb 3" from the plan's stage names.
std::string describePlanAction(const sched::Plan &plan,
                               const sched::Action &action);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_EXECUTOR_H
