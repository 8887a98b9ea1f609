//===- RunOptions.cpp - stagecraft-run's command line ---------------------===//
//
// The options of stagecraft-run, parsed into the runtime's DriverOptions and
// the spec compiler's CompileOptions.
//
//===----------------------------------------------------------------------===//

#include "tools/stagecraft-run/RunOptions.h"
#include "runtime/Options.h"
#include "tools/Version.h"

#include "llvm/Support/CommandLine.h"

using namespace llvm;

static cl::OptionCategory runCategory("Running a plan");
static cl::OptionCategory trainCategory("Training with the reference model");

static cl::opt<std::string> input(cl::Positional, cl::Required,
                                  cl::desc("<spec.mlir | plan.json>"),
                                  cl::cat(runCategory));
static cl::opt<std::string> backend(
    "backend", cl::init("local"), cl::cat(runCategory),
    cl::desc("local (threads), mpi (one process per rank under mpirun) or "
             "cuda (default: local)"));
static cl::opt<std::string> cudaTransport(
    "cuda-transport", cl::init("auto"), cl::cat(runCategory),
    cl::desc("cuda backend in one process: copy (device-to-device and peer "
             "copies), nccl (NCCL, a GPU per rank) or auto (nccl when every "
             "rank has a GPU of its own; default)"));
static cl::opt<std::string> scheduleKind(
    "schedule", cl::cat(runCategory),
    cl::desc(
        "schedule a spec with this kind before running: gpipe, 1f1b, "
        "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix, auto, exact "
        "or ilp "
        "(default: the pipe.schedule in the file)"));
static cl::opt<int> chunks("chunks", cl::init(0), cl::cat(runCategory),
                           cl::desc("chunks for interleaved-1f1b (default 0: "
                                    "stages / ranks)"));
static cl::opt<double> memoryLimit(
    "memory-limit", cl::init(0.0), cl::cat(runCategory),
    cl::desc("per-rank memory limit for auto (default 0: 1F1B's highest "
             "peak)"));
static cl::opt<std::string> recompute(
    "recompute", cl::cat(runCategory),
    cl::desc("with --schedule: none, full, selective or auto (default: auto "
             "when the spec has a capacity, else none; helix: full)"));
static cl::opt<std::string> objective(
    "objective", cl::init("makespan"), cl::cat(runCategory),
    cl::desc("with --schedule: what auto and the zero-bubble kinds minimize, "
             "makespan (one step between barriers, as this runtime runs; "
             "default) or span (the largest per-rank span: the steady-state "
             "step of overlapped steps)"));
static cl::opt<std::string> partitionStages(
    "stages", cl::cat(runCategory),
    cl::desc("with a spec of pipe.layer ops: cut it into this many stages "
             "(--pipe-partition's stages=; default auto: one per rank)"));
static cl::opt<int> ranksOverride(
    "ranks", cl::init(0), cl::cat(runCategory),
    cl::desc("with a spec: schedule it on this many ranks instead of its "
             "ranks(N) (re-planning on surviving ranks; default 0: the "
             "spec's)"));
static cl::list<int> survivorsOption(
    "survivors", cl::CommaSeparated, cl::cat(runCategory),
    cl::desc("with --ranks=N on a spec with devices(...): the N ranks of the "
             "spec that remain, e.g. 0,1,3 (they keep their devices; "
             "--elastic passes it)"));
static cl::opt<bool> elastic(
    "elastic", cl::cat(trainCategory),
    cl::desc("supervise training: when a rank is lost (exit 75), re-plan the "
             "spec for one rank fewer (the same --schedule when it still "
             "applies, else auto), verify it and resume from the last "
             "checkpoint; needs a spec, --schedule, --train and "
             "--checkpoint-dir (options in --name=value form)"));
static cl::opt<int> maxFailures(
    "max-failures", cl::init(3), cl::cat(trainCategory),
    cl::desc("with --elastic: give up after this many lost ranks (default "
             "3)"));
static cl::opt<std::string> launcher(
    "launcher", cl::cat(trainCategory),
    cl::desc("with --elastic: the command that starts each attempt, {ranks} "
             "replaced by the rank count, e.g. \"mpirun --allow-run-as-root "
             "--oversubscribe -np {ranks}\" (the attempts then run "
             "--backend=mpi); default: in one process on the local backend"));
static cl::opt<std::string> scheduleName(
    "schedule-name", cl::cat(runCategory),
    cl::desc("which pipe.schedule of a spec to run (default: the only one)"));
static cl::opt<int64_t>
    unitBytes("unit-bytes", cl::init(4096), cl::cat(runCategory),
              cl::desc("bytes per memory unit of a spec (default 4096)"));
static cl::opt<std::string> timeUnit(
    "time-unit", cl::init("1ms"), cl::cat(runCategory),
    cl::desc("wall time of one cost unit: e.g. 1ms, 250us, 0.01s (default "
             "1ms; at most a day)"));
static cl::opt<std::string> timeout(
    "timeout", cl::init("60s"), cl::cat(runCategory),
    cl::desc("stop when no rank progresses for this long (default 60s)"));
static cl::opt<std::string> maxMemory(
    "max-memory", cl::init("8G"), cl::cat(runCategory),
    cl::desc("refuse runs whose buffers (and, with --train, model) would need "
             "more host memory in this process than this (bytes, or with a "
             "K, M, G or T suffix; default 8G)"));
static cl::opt<std::string> tracePath(
    "trace", cl::cat(runCategory),
    cl::desc("write measured and simulated timelines (Chrome trace) to this "
             "file"));
static cl::opt<bool> train("train", cl::cat(trainCategory),
                           cl::desc("run the reference transformer instead of "
                                    "the timed kernel"));
static cl::opt<bool> reference(
    "reference", cl::cat(trainCategory),
    cl::desc("with --train: the sequential reference (one thread, microbatch "
             "after microbatch)"));
static cl::opt<int> dataParallel(
    "data-parallel", cl::init(1), cl::cat(trainCategory),
    cl::desc("with --train: N replicas of the pipeline (N x ranks threads, "
             "or N x ranks MPI processes, rank r of replica k being process "
             "k x ranks + r), each on its own microbatches; each stage's "
             "gradients are averaged over the replicas after its last weight "
             "gradient (default 1)"));
static cl::opt<int> steps("steps", cl::init(1), cl::cat(trainCategory),
                          cl::desc("training steps (default 1)"));
static cl::opt<int> hidden("hidden", cl::init(32), cl::cat(trainCategory),
                           cl::desc("model width (default 32)"));
static cl::opt<int> heads("heads", cl::init(4), cl::cat(trainCategory),
                          cl::desc("attention heads, dividing --hidden "
                                   "(default 4)"));
static cl::opt<int> sequence("seq", cl::init(16), cl::cat(trainCategory),
                             cl::desc("sequence length (default 16)"));
static cl::opt<int> vocab("vocab", cl::init(64), cl::cat(trainCategory),
                          cl::desc("vocabulary size (default 64)"));
static cl::opt<int> batch("batch", cl::init(2), cl::cat(trainCategory),
                          cl::desc("sequences per microbatch (default 2)"));
static cl::opt<unsigned> seed("seed", cl::init(1), cl::cat(trainCategory),
                              cl::desc("seed of the weights and the synthetic "
                                       "tokens (default 1)"));
static cl::opt<std::string> modelCode(
    "model", cl::init("reference"), cl::cat(trainCategory),
    cl::desc("on local and mpi: reference (the CPU model; default) or device "
             "(the device model the cuda backend trains with, on a checking "
             "host device: the GPU code path without a GPU)"));
static cl::opt<std::string> optimizer("optimizer", cl::init("sgd"),
                                      cl::cat(trainCategory),
                                      cl::desc("sgd (default) or adamw"));
static cl::opt<float> lr("lr", cl::init(0.05f), cl::cat(trainCategory),
                         cl::desc("learning rate (default 0.05)"));
static cl::opt<std::string> dumpGrads(
    "dump-grads", cl::cat(trainCategory),
    cl::desc("directory for each stage's gradients after the first step"));
static cl::opt<std::string> checkpointDir(
    "checkpoint-dir", cl::cat(trainCategory),
    cl::desc("write checkpoints into this folder (every stage's weights and "
             "optimizer state by global parameter, the step, a manifest with "
             "checksums; written atomically, the previous one kept)"));
static cl::opt<int> checkpointEvery(
    "checkpoint-every", cl::init(0), cl::cat(trainCategory),
    cl::desc("checkpoint every N steps and after the last (needs "
             "--checkpoint-dir; default 0: only with --checkpoint-dir, after "
             "the last step)"));
static cl::opt<bool> resume(
    "resume", cl::cat(trainCategory),
    cl::desc("start from the newest valid checkpoint in --checkpoint-dir, "
             "whatever its stage split, rank count or kind; --steps stays the "
             "total"));
static cl::opt<std::string> injectFailure(
    "inject-failure", cl::cat(trainCategory),
    cl::desc("testing: RANK:STEP[:kill|hang|checkpoint]: RANK dies at the "
             "start of training step STEP (kill, the default: on mpi the "
             "process kills itself, on local its thread fails), stops making "
             "progress there (hang), or dies while writing the checkpoint "
             "taken after STEP steps (checkpoint); the run then exits with "
             "status 75 (a lost rank). With --elastic, a comma-separated "
             "list: the k-th failure goes to the k-th attempt (its RANK "
             "counts that attempt's ranks; none: no failure in that "
             "attempt). With --data-parallel (local, kill): RANK counts "
             "every replica's ranks (rank r of replica k is k x ranks + r); "
             "its replica leaves and the others go on"));
static cl::opt<std::string> sharding(
    "sharding", cl::init("none"), cl::cat(trainCategory),
    cl::desc("with --data-parallel: none (whole replicas; default) or full "
             "(each replica keeps 1/N of every stage's weights and AdamW "
             "moments between steps, gathers the weights before the stage's "
             "first action and reduce-scatters its gradients after its "
             "last: FSDP / ZeRO-3) or hybrid (the same within groups of "
             "--shard-group replicas, the gradients then all-reduced across "
             "the groups: HSDP)"));
static cl::opt<int> shardGroup(
    "shard-group", cl::init(0), cl::cat(trainCategory),
    cl::desc("with --sharding=hybrid: replicas per shard group (consecutive "
             "replicas; divides --data-parallel)"));
static cl::opt<int> rejoinAt(
    "rejoin-at", cl::init(-1), cl::cat(trainCategory),
    cl::desc("testing, with --data-parallel and --inject-failure on local: "
             "the failed replica restarts and trains again from this step, "
             "with the weights and optimizer state of a replica that "
             "stayed"));
static cl::opt<double> stragglerThreshold(
    "straggler-threshold", cl::init(0.0), cl::cat(trainCategory),
    cl::desc("with --train and --checkpoint-dir: at each checkpoint, stop "
             "(exit 76) when a rank's measured compute time per simulated "
             "unit exceeded the reference rank's (the lower median over "
             "ranks) by more than this factor, e.g. 1.5, in each of the last "
             "--straggler-steps steps, printing its measured speed; "
             "--elastic then re-plans with it (--speed-factors) and resumes. "
             "Default 0: off"));
static cl::opt<int> stragglerSteps(
    "straggler-steps", cl::init(3), cl::cat(trainCategory),
    cl::desc("with --straggler-threshold: how many steps in a row a rank "
             "must be that slow (default 3)"));
static cl::list<double> speedFactors(
    "speed-factors", cl::CommaSeparated, cl::cat(runCategory),
    cl::desc("with a spec: one factor per rank (of --ranks, in --survivors' "
             "order) multiplying its device's speed, e.g. 1,0.4,1,1 for a "
             "rank measured at 40 %; the spec is planned for those speeds "
             "(--elastic passes the speeds stragglers showed)"));
static cl::opt<std::string> injectSlowdown(
    "inject-slowdown", cl::cat(trainCategory),
    cl::desc("testing: RANK:STEP:FACTOR: from training step STEP, every "
             "compute of RANK (numbered as in the first --elastic attempt) "
             "takes FACTOR times as long, like a slow device"));
static cl::opt<int> maxReplans(
    "max-replans", cl::init(3), cl::cat(trainCategory),
    cl::desc("with --elastic and --straggler-threshold: give up re-planning "
             "for stragglers after this many times and run on (default 3)"));
static cl::opt<std::string> failureStamp(
    "failure-stamp", cl::Hidden, cl::cat(trainCategory),
    cl::desc("testing: the injected failure writes the time it fired "
             "(seconds since the epoch) into this file"));
static cl::opt<std::string> dumpWeights(
    "dump-weights", cl::cat(trainCategory),
    cl::desc("directory for each stage's weights after the last step"));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm", cl::init(0.0), cl::cat(trainCategory),
    cl::desc("clip the gradients of each step to this global L2 norm (all "
             "ranks' together, as torch's clip_grad_norm_); 0: none"));
static cl::opt<bool> overlapSteps(
    "overlap-steps", cl::cat(trainCategory),
    cl::desc("no barrier between steps: each rank updates after its own "
             "last W and starts the next step; the global gradient checks "
             "are validated after the fact and a failed step is rolled back "
             "(the same losses and weights as without)"));
static cl::opt<std::string> injectNonFinite(
    "inject-nonfinite", cl::cat(trainCategory), cl::Hidden,
    cl::desc("testing: STAGE:STEP, a NaN in that stage's gradient at that "
             "step"));
static cl::opt<std::string> calibrateOutput(
    "calibrate", cl::cat(runCategory),
    cl::desc("after the run, write the spec with the costs it measured "
             "(per stage F, I, W as medians, the link latency, the runtime's "
             "overhead per compute; ms) to this file"));
static cl::opt<std::string> profile(
    "profile", cl::cat(trainCategory), cl::ValueOptional,
    cl::desc("with --train and a spec: measure F, I, W of every stage and "
             "write the spec with measured costs (ms) to this file (default "
             "stdout); runs nothing else"));
static cl::opt<int> killRank("fault-kill-rank", cl::init(-1), cl::Hidden,
                             cl::desc("testing: this rank kills itself"));
static cl::opt<int>
    killAfter("fault-kill-after", cl::init(0), cl::Hidden,
              cl::desc("testing: after this many instructions"));

stagecraft::RunCommandLine stagecraft::parseRunCommandLine(int argc,
                                                           char **argv) {
  addVersionPrinter();
  // --help lists Stagecraft's options only (LLVM's back-end options are
  // linked in but mean nothing here).
  cl::HideUnrelatedOptions({&runCategory, &trainCategory});
  cl::ParseCommandLineOptions(argc, argv, "Stagecraft pipeline runtime\n");
  RunCommandLine line;
  line.elastic = elastic;
  runtime::DriverOptions &o = line.run;
  o.input = input;
  o.backend = backend;
  o.cudaTransport = cudaTransport;
  o.scheduleKind = scheduleKind;
  o.chunks = chunks;
  o.ranks = ranksOverride;
  o.survivors.assign(survivorsOption.begin(), survivorsOption.end());
  o.speedFactors.assign(speedFactors.begin(), speedFactors.end());
  o.timeUnit = timeUnit;
  o.timeout = timeout;
  o.maxMemory = maxMemory;
  o.tracePath = tracePath;
  o.commandLine = runtime::quoteCommandLine(argc, argv);
  o.train = train;
  o.reference = reference;
  o.steps = steps;
  o.dataParallel = dataParallel;
  o.rejoinAt = rejoinAt;
  o.sharding = sharding;
  o.shardGroup = shardGroup;
  o.hidden = hidden;
  o.heads = heads;
  o.sequence = sequence;
  o.sequenceGiven = sequence.getNumOccurrences() > 0;
  o.vocab = vocab;
  o.batch = batch;
  o.seed = seed;
  o.modelCode = modelCode;
  o.optimizer = optimizer;
  o.lr = lr;
  o.dumpGrads = dumpGrads;
  o.dumpWeights = dumpWeights;
  o.checkpointDir = checkpointDir;
  o.checkpointEvery = checkpointEvery;
  o.resume = resume;
  o.injectFailure = injectFailure;
  o.failureStamp = failureStamp;
  o.injectSlowdown = injectSlowdown;
  if (stragglerThreshold.getNumOccurrences() || stragglerThreshold != 0.0)
    o.stragglerThreshold = stragglerThreshold;
  o.stragglerSteps = stragglerSteps;
  o.clipGradNorm = clipGradNorm;
  o.overlapSteps = overlapSteps;
  o.injectNonFinite = injectNonFinite;
  o.calibrate = calibrateOutput;
  if (profile.getNumOccurrences())
    o.profile = profile;
  o.maxFailures = maxFailures;
  o.maxReplans = maxReplans;
  o.launcher = launcher;
  o.killRank = killRank;
  o.killAfter = killAfter;

  pipe::CompileOptions &c = line.compile;
  c.kind = scheduleKind;
  c.chunks = chunks;
  c.memoryLimit = memoryLimit;
  c.recompute = recompute;
  c.objective = objective;
  // Steps that overlap cost the span: plan for it unless told otherwise.
  if (overlapSteps && !objective.getNumOccurrences())
    c.objective = "span";
  c.scheduleName = scheduleName;
  c.unitBytes = unitBytes;
  c.ranks = ranksOverride;
  c.partitionStages = partitionStages;
  c.survivors = o.survivors;
  c.speedFactors = o.speedFactors;
  return line;
}
