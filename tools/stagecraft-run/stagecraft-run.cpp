//===- stagecraft-run.cpp - Runs a pipeline plan --------------------------===//
//
// `stagecraft-run spec.mlir --schedule=KIND` compiles and runs in one go;
// `stagecraft-run plan.json` runs a plan from `stagecraft-translate
// --pipe-to-plan`. `--backend=local` (default) runs every rank as a thread;
// `mpirun -np N stagecraft-run --backend=mpi ...` runs one rank per process;
// `--backend=cuda` runs every rank on the CUDA devices of this process.
//
//===----------------------------------------------------------------------===//

#include "runtime/Checkpoint.h"
#include "runtime/Options.h"
#include "runtime/Runtime.h"
#include "tools/Version.h"
#include "translate/PlanCompiler.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#ifdef STAGECRAFT_HAVE_MPI
#include <mpi.h>
#endif

using namespace llvm;

/// Whether an MPI launcher started several processes (Open MPI and
/// MPICH / Slurm launchers set these).
static bool launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *size = std::getenv(var); size && std::atoi(size) > 1)
      return true;
  return false;
}

[[maybe_unused]] static const char *kNoCuda =
    "this build has no cuda backend (nvcc was not found when it was "
    "configured)";
namespace sched = stagecraft::pipe::sched;

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
    cl::desc("schedule a spec with this kind before running: gpipe, 1f1b, "
             "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix or auto "
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
             "attempt)"));
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

using stagecraft::runtime::kMaxDurationSeconds;
using stagecraft::runtime::parseBytes;
using stagecraft::runtime::parseDuration;

/// Fails when what this process would allocate exceeds --max-memory: the
/// plan's slots of the ranks it runs (all of them, or MPI rank \p mpiRank)
/// and, when training, the model those ranks hold.
static Error checkMemory(const sched::Plan &plan, int mpiRank,
                         const stagecraft::runtime::TrainOptions *training) {
  Expected<double> limit = parseBytes(maxMemory, "max-memory");
  if (!limit)
    return limit.takeError();
  double slots = 0.0;
  int layers = 0;
  std::string largest;
  double largestBytes = -1.0;
  for (int r = 0; r < plan.numRanks(); ++r) {
    if (mpiRank >= 0 && r != mpiRank)
      continue;
    for (size_t i = 0; i < plan.ranks[r].slotBytes.size(); ++i) {
      double b = double(plan.ranks[r].slotBytes[i]);
      slots += b;
      if (b > largestBytes) {
        largestBytes = b;
        largest = fmt::format("rank {} slot {}: {} bytes", r, i, b);
      }
    }
    for (size_t s = 0; s < plan.placement.size(); ++s)
      if (plan.placement[s] == r)
        layers += std::max(1, plan.stageLayers[s]);
  }
  double model =
      training
          ? training->model.estimateBytes(layers, training->model.microbatches)
          : 0.0;
  if (slots + model <= *limit)
    return Error::success();
  return createStringError(
      inconvertibleErrorCode(),
      fmt::format("this run needs about {:.4g} bytes ({:.4g} in buffer slots, "
                  "largest {}{}), above --max-memory={} ({:.4g} bytes); raise "
                  "it if the machine has the memory",
                  slots + model, slots, largest,
                  training ? fmt::format("; {:.4g} for the model", model) : "",
                  maxMemory.getValue(), *limit));
}

/// How the command line asks a spec to be scheduled and planned.
static stagecraft::pipe::CompileOptions compileOptions() {
  stagecraft::pipe::CompileOptions options;
  options.kind = scheduleKind;
  options.chunks = chunks;
  options.memoryLimit = memoryLimit;
  options.recompute = recompute;
  options.objective = objective;
  options.scheduleName = scheduleName;
  options.unitBytes = unitBytes;
  options.ranks = ranksOverride;
  options.partitionStages = partitionStages;
  options.survivors.assign(survivorsOption.begin(), survivorsOption.end());
  options.speedFactors.assign(speedFactors.begin(), speedFactors.end());
  return options;
}

static Expected<sched::Plan> compileInput(int64_t minMessageBytes) {
  stagecraft::pipe::CompileOptions options = compileOptions();
  options.minMessageBytes = minMessageBytes;
  return stagecraft::pipe::compileSpecFile(input, options);
}

static Expected<sched::Plan> loadInput(int64_t minMessageBytes) {
  if (StringRef(input).ends_with(".mlir") || !scheduleKind.empty()) {
#ifdef STAGECRAFT_HAVE_MPI
    // Under mpirun one process compiles and the others take its plan: a
    // search under a time limit (auto) could otherwise end differently in
    // each process, and ranks would run plans that do not match.
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::string text;
      int64_t header[2] = {0, 0}; // ok, bytes
      if (rank == 0) {
        Expected<sched::Plan> plan = compileInput(minMessageBytes);
        header[0] = plan ? 1 : 0;
        text = plan ? sched::writePlan(*plan) : toString(plan.takeError());
        header[1] = static_cast<int64_t>(text.size());
      }
      MPI_Bcast(header, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
      text.resize(static_cast<size_t>(header[1]));
      for (int64_t at = 0; at < header[1];) {
        int chunk =
            static_cast<int>(std::min<int64_t>(header[1] - at, 1 << 30));
        MPI_Bcast(text.data() + at, chunk, MPI_CHAR, 0, MPI_COMM_WORLD);
        at += chunk;
      }
      if (!header[0])
        return createStringError(inconvertibleErrorCode(), text);
      Expected<sched::Plan> plan = sched::readPlan(text);
      if (!plan)
        return createStringError(inconvertibleErrorCode(),
                                 "the plan rank 0 compiled: " +
                                     toString(plan.takeError()));
      return plan;
    }
#endif
    return compileInput(minMessageBytes);
  }
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(input);
  if (!file)
    return createStringError(file.getError(), "cannot read " + input + ": " +
                                                  file.getError().message());
  Expected<sched::Plan> plan = sched::readPlan((*file)->getBuffer());
  if (!plan)
    return createStringError(inconvertibleErrorCode(),
                             input + ": " + toString(plan.takeError()));
  return plan;
}

/// This process's command line, for the mpirun command a process-count
/// error prints.
static std::string commandLine;

static int run(int rank) {
  auto fail = [&](Error err) {
    std::string message = toString(std::move(err));
    errs() << "stagecraft-run: error: " << message << "\n";
    // A lost rank is re-plannable; anything else is bad input or a bug.
    return StringRef(message).contains(stagecraft::runtime::kRankLostPrefix)
               ? stagecraft::runtime::kExitRankLost
               : 1;
  };
  Expected<double> unit = parseDuration(timeUnit, "time-unit");
  if (!unit)
    return fail(unit.takeError());
  Expected<double> limit = parseDuration(timeout, "timeout");
  if (!limit)
    return fail(limit.takeError());
  stagecraft::runtime::TrainOptions training;
  if (train) {
    training.model.hidden = hidden;
    training.model.heads = heads;
    training.model.sequence = sequence;
    training.model.vocab = vocab;
    training.model.batch = batch;
    training.model.seed = seed;
    training.steps = steps;
    training.dumpGrads = dumpGrads;
    training.dumpWeights = dumpWeights;
    if (!injectFailure.empty()) {
      if (StringRef(injectFailure).contains(','))
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure=" + injectFailure +
                ": a run takes one failure; a list is for --elastic"));
      if (Error err = stagecraft::runtime::parseInjectedFailure(injectFailure,
                                                                training))
        return fail(std::move(err));
      if (reference || backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure runs on the local and mpi backends"));
      if (training.inject ==
              stagecraft::runtime::TrainOptions::Inject::Checkpoint &&
          checkpointDir.empty())
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure=" + injectFailure +
                ": a failure while checkpointing needs --checkpoint-dir"));
      training.failureStamp = failureStamp;
    }
    if (!injectSlowdown.empty()) {
      if (Error err = stagecraft::runtime::parseInjectedSlowdown(injectSlowdown,
                                                                 training))
        return fail(std::move(err));
      if (reference || backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-slowdown runs on the local and mpi backends"));
    }
    training.identity.assign(survivorsOption.begin(), survivorsOption.end());
    if (stragglerThreshold != 0.0 || stragglerThreshold.getNumOccurrences()) {
      if (!(stragglerThreshold > 1.0) || !std::isfinite(stragglerThreshold))
        return fail(createStringError(
            inconvertibleErrorCode(),
            fmt::format("--straggler-threshold={} must be above 1 (a factor "
                        "over the reference rank's time per unit)",
                        double(stragglerThreshold))));
      if (stragglerSteps < 1)
        return fail(createStringError(
            inconvertibleErrorCode(),
            fmt::format("--straggler-steps={} must be at least 1",
                        int(stragglerSteps))));
      if (checkpointDir.empty() || reference || backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--straggler-threshold stops at a checkpoint: it needs "
            "--checkpoint-dir and runs on the local and mpi backends"));
      training.stragglerThreshold = stragglerThreshold;
      training.stragglerSteps = stragglerSteps;
    }
    training.checkpointDir = checkpointDir;
    training.resume = resume;
    if (checkpointEvery < 0)
      return fail(createStringError(
          inconvertibleErrorCode(),
          fmt::format("--checkpoint-every={} must be at least 1",
                      int(checkpointEvery))));
    if ((checkpointEvery > 0 || resume) && checkpointDir.empty())
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--checkpoint-every and --resume need --checkpoint-dir=DIR"));
    // With a folder, at least the final state is kept.
    training.checkpointEvery =
        checkpointDir.empty()
            ? 0
            : (checkpointEvery > 0 ? int(checkpointEvery) : int(steps));
    if (!checkpointDir.empty() && modelCode == "device")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "checkpoints save the reference stages' weights; --model=device "
          "keeps its own in device memory and is not checkpointed yet"));
    if (!checkpointDir.empty() && backend == "cuda")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "checkpoints run on the local and mpi backends (and --reference), "
          "not on cuda"));
    if (modelCode != "reference" && modelCode != "device")
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--model=" + modelCode +
                                        ": expected reference or device"));
    if (modelCode == "device" && backend == "cuda")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--model=device is for local and mpi: the cuda backend always "
          "trains the device model"));
    training.deviceModel = modelCode == "device";
    training.optimizer.lr = lr;
    if (optimizer == "adamw")
      training.optimizer.kind =
          stagecraft::kernels::OptimizerConfig::Kind::AdamW;
    else if (optimizer != "sgd")
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--optimizer=" + optimizer +
                                        ": expected sgd or adamw"));
    // Sizes first: message sizes below are products of them.
    if (Error err = stagecraft::runtime::checkTrainOptions(training))
      return fail(std::move(err));
  }
  if (profile.getNumOccurrences()) {
    if (!train)
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--profile needs --train"));
    StringRef output = profile.empty() ? StringRef("-") : StringRef(profile);
    Error err = Error::success();
    if (backend == "cuda") {
#ifdef STAGECRAFT_HAVE_CUDA
      err = stagecraft::runtime::withCudaStages(
          [&](const stagecraft::kernels::StageFactory &where) {
            return stagecraft::pipe::profileSpecFile(input, training.model,
                                                     steps, output, where);
          });
#else
      err = createStringError(inconvertibleErrorCode(), kNoCuda);
#endif
    } else {
      err = stagecraft::pipe::profileSpecFile(input, training.model, steps,
                                              output);
    }
    if (err)
      return fail(std::move(err));
    // Say where the measured spec went (on stderr when it went to stdout).
    (output == "-" ? errs() : outs())
        << "profiled costs (milliseconds per microbatch) written to "
        << (output == "-" ? StringRef("stdout") : output)
        << "; run or schedule that spec with --time-unit=1ms\n";
    return 0;
  }
  Expected<sched::Plan> plan = loadInput(
      train ? stagecraft::runtime::trainingMessageBytes(training.model) : 64);
  if (!plan)
    return fail(plan.takeError());
  training.model.microbatches = plan->microbatches;
  if (train && !plan->stageInputs.empty()) {
    // A branching model (StageGraph): the reference model's pieces joined
    // along the sequence, on the host.
    auto refuse = [&](const std::string &why) {
      return fail(createStringError(inconvertibleErrorCode(),
                                    "training a branching pipeline: " + why));
    };
    if (modelCode == "device" || backend == "cuda")
      return refuse("it trains the reference model on the host (local and "
                    "mpi), not the device model");
    if (!plan->lengths.empty())
      return refuse("microbatches of different lengths are not combined "
                    "with branches yet");
    // Messages hold the longest sequence (a join's).
    if (StringRef(input).ends_with(".mlir") || !scheduleKind.empty()) {
      stagecraft::kernels::ModelConfig longest = training.model;
      longest.sequence =
          stagecraft::runtime::stageGraph(*plan, sequence).longest();
      if (Error err = longest.validate())
        return fail(std::move(err));
      plan = loadInput(stagecraft::runtime::trainingMessageBytes(longest));
      if (!plan)
        return fail(plan.takeError());
    }
  }
  if (train && !plan->lengths.empty()) {
    // Each microbatch trains at its own sequence length; messages and the
    // position table are sized for the longest.
    auto refuse = [&](const std::string &why) {
      return fail(createStringError(inconvertibleErrorCode(),
                                    "training on lengths(...): " + why));
    };
    if (sequence.getNumOccurrences())
      return refuse("the spec gives each microbatch's sequence length; drop "
                    "--seq");
    if (modelCode == "device" || backend == "cuda")
      return refuse("microbatches of different lengths train on the "
                    "reference model (local and mpi), not the device model");
    for (bool attention : plan->stageAttention)
      if (attention)
        return refuse("helix plans train one sequence length");
    int longest = 0;
    for (size_t k = 0; k < plan->lengths.size(); ++k) {
      double l = plan->lengths[k];
      if (l != std::floor(l) || l < 1 || l > 65536)
        return refuse(fmt::format("microbatch {} is {} long; training needs "
                                  "whole token counts in 1..65536",
                                  k, l));
      training.model.lengths.push_back(static_cast<int>(l));
      longest = std::max(longest, static_cast<int>(l));
    }
    training.model.sequence = longest;
    training.model.order = plan->microbatchOrder;
    if (Error err = stagecraft::runtime::checkTrainOptions(training))
      return fail(std::move(err));
    // A spec is planned again with messages that hold the longest
    // microbatch (a plan file must have been written with them).
    if (StringRef(input).ends_with(".mlir") || !scheduleKind.empty()) {
      plan =
          loadInput(stagecraft::runtime::trainingMessageBytes(training.model));
      if (!plan)
        return fail(plan.takeError());
    }
  }
  if (!train)
    for (int r = 0; r < plan->numRanks(); ++r)
      for (size_t i = 0; i < plan->ranks[r].ops.size(); ++i) {
        const sched::PlanOp &op = plan->ranks[r].ops[i];
        double seconds = op.cost * *unit;
        if (op.kind == sched::PlanOp::Kind::Compute &&
            !(seconds <= kMaxDurationSeconds))
          return fail(createStringError(
              inconvertibleErrorCode(),
              fmt::format(
                  "rank {}: instruction {}: {} costs {:.6g} x {:.6g} s = "
                  "{:.6g} "
                  "s, above the limit of {} s for a timed compute",
                  r, i,
                  stagecraft::runtime::describePlanAction(*plan, op.action),
                  op.cost, *unit, seconds, kMaxDurationSeconds)));
      }
  if (Error err = checkMemory(*plan, backend == "mpi" ? rank : -1,
                              train ? &training : nullptr))
    return fail(std::move(err));
  stagecraft::runtime::RunOptions options;
  options.exec.timeUnit = *unit;
  options.exec.train = train ? &training : nullptr;
  options.timeout = *limit;
  options.commandLine = commandLine;
  options.tracePath = tracePath;
  options.cudaTransport = cudaTransport;
  if (killRank >= 0 && killRank == rank)
    options.exec.killAfter = killAfter;
  if (reference && !train)
    return fail(createStringError(inconvertibleErrorCode(),
                                  "--reference needs --train"));
  auto runReference = [&]() -> Expected<stagecraft::runtime::RunReport> {
    if (backend != "cuda")
      return stagecraft::runtime::runReference(
          *plan, training, stagecraft::runtime::hostStagesFor(training));
#ifdef STAGECRAFT_HAVE_CUDA
    std::optional<stagecraft::runtime::RunReport> result;
    if (Error err = stagecraft::runtime::withCudaStages(
            [&](const stagecraft::kernels::StageFactory &where) -> Error {
              auto r =
                  stagecraft::runtime::runReference(*plan, training, where);
              if (!r)
                return r.takeError();
              result = std::move(*r);
              return Error::success();
            }))
      return std::move(err);
    return std::move(*result);
#else
    return createStringError(inconvertibleErrorCode(), kNoCuda);
#endif
  };
  Expected<stagecraft::runtime::RunReport> report =
      reference            ? runReference()
      : backend == "local" ? stagecraft::runtime::runLocal(*plan, options)
      : backend == "cuda"
#if defined(STAGECRAFT_HAVE_MPI) && defined(STAGECRAFT_HAVE_NCCL)
          ? (launchedByMpi() ? stagecraft::runtime::runCudaMpi(*plan, options)
                             : stagecraft::runtime::runCuda(*plan, options))
#elif defined(STAGECRAFT_HAVE_CUDA)
          ? stagecraft::runtime::runCuda(*plan, options)
#else
          ? Expected<stagecraft::runtime::RunReport>(
                createStringError(inconvertibleErrorCode(), kNoCuda))
#endif
#ifdef STAGECRAFT_HAVE_MPI
          : stagecraft::runtime::runMpi(*plan, options);
#else
          : Expected<stagecraft::runtime::RunReport>(createStringError(
                inconvertibleErrorCode(), "this build has no MPI"));
#endif
  if (!report)
    return fail(report.takeError());
  // Stopped for a straggler: rank 0 exits with the status that says
  // "re-plan with the speeds measured", after printing the straggler lines.
  // The other ranks' part is done and they exit 0: under mpirun a non-zero
  // exit ends the job, which could end rank 0 before it printed.
  const int status =
      report->stoppedAt >= 0 ? stagecraft::runtime::kExitStraggler : 0;
  if (rank != 0)
    return 0;
  outs() << stagecraft::runtime::formatRunReport(
      *plan, *report, options,
      reference ? std::string("sequential reference") : std::string(backend));
  if (train && !dumpGrads.empty()) {
    std::error_code ec;
    raw_fd_ostream os(dumpGrads + "/losses.txt", ec);
    if (ec)
      return fail(
          createStringError(ec, "cannot write " + dumpGrads + "/losses.txt"));
    for (double loss : report->losses)
      os << format("%.9g\n", loss);
  }
  if (!tracePath.empty()) {
    if (Error err = stagecraft::runtime::writeRunTrace(*plan, *report, options))
      return fail(std::move(err));
    outs() << "trace written to " << tracePath << "\n";
  }
  if (status != 0) {
    outs().flush();
    for (const stagecraft::runtime::Straggler &s : report->stragglers)
      errs() << stagecraft::runtime::describeStraggler(s, report->stoppedAt,
                                                       training.identity)
             << "\n";
  }
  return status;
}

/// Compiles the spec for \p ranks ranks as \p kind, timing it.
static Expected<sched::Plan> planFor(int ranks, const std::string &kind,
                                     llvm::ArrayRef<int> survivors,
                                     llvm::ArrayRef<double> factors,
                                     double &ms) {
  stagecraft::pipe::CompileOptions options = compileOptions();
  options.kind = kind;
  options.chunks = kind == "interleaved-1f1b" ? int(chunks) : 0;
  options.ranks = ranks;
  if (!survivors.empty())
    options.survivors.assign(survivors.begin(), survivors.end());
  options.speedFactors.assign(factors.begin(), factors.end());
  options.quiet = true;
  auto t0 = std::chrono::steady_clock::now();
  Expected<sched::Plan> plan =
      stagecraft::pipe::compileSpecFile(input, options);
  ms = std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - t0)
           .count();
  return plan;
}

/// Seconds since the epoch (a failure stamp's clock).
static double epochSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The rank an attempt's error output names as lost: our own `rank lost:
/// rank R` line, or Open MPI's report of a process that died.
static std::optional<int> lostRankIn(StringRef text) {
  for (StringRef marker :
       {StringRef("rank lost: rank "), StringRef("process rank ")}) {
    size_t at = text.find(marker);
    if (at == StringRef::npos)
      continue;
    StringRef digits = text.drop_front(at + marker.size());
    digits = digits.take_while([](char c) { return c >= '0' && c <= '9'; });
    int r = -1;
    if (!digits.getAsInteger(10, r))
      return r;
  }
  return std::nullopt;
}

/// --elastic: runs attempts as child processes of this binary; after each
/// lost rank, re-plans for one rank fewer (compiling the spec, or taking a
/// plan file's precomputed fallback) and resumes from the last checkpoint.
static int superviseElastic(int argc, char **argv) {
  auto stop = [](const std::string &message, int rc) {
    errs() << "stagecraft-run: elastic: " << message << "\n";
    return rc;
  };
  const bool fromSpec = StringRef(input).ends_with(".mlir");
  if (!train || checkpointDir.empty() || (fromSpec && scheduleKind.empty()) ||
      (!fromSpec && !scheduleKind.empty()))
    return stop("--elastic needs --train, --checkpoint-dir and either a spec "
                "(.mlir) with --schedule or a plan file (from "
                "stagecraft-translate --pipe-to-plan, its fallbacks for fewer "
                "ranks with --fallbacks=K)",
                1);
  // One injected failure per attempt, checked before anything runs.
  std::vector<std::string> injections;
  if (!injectFailure.empty()) {
    SmallVector<StringRef, 4> parts;
    StringRef(injectFailure).split(parts, ',');
    for (StringRef part : parts) {
      // "none": this attempt runs without one.
      if (part == "none") {
        injections.push_back("");
        continue;
      }
      stagecraft::runtime::TrainOptions probe;
      if (Error err = stagecraft::runtime::parseInjectedFailure(part, probe))
        return stop(toString(std::move(err)), 1);
      injections.push_back(part.str());
    }
  }
  if (!fromSpec && stragglerThreshold != 0.0)
    return stop("--straggler-threshold re-plans with the measured speeds, "
                "which compiles the spec: run --elastic on the spec, not on "
                "a plan file",
                1);
  double ms = 0.0;
  std::string kind = scheduleKind;
  std::optional<sched::Plan> planFile;
  int ranks = 0;
  if (fromSpec) {
    Expected<sched::Plan> first = planFor(
        ranksOverride, kind,
        std::vector<int>(survivorsOption.begin(), survivorsOption.end()),
        std::vector<double>(speedFactors.begin(), speedFactors.end()), ms);
    if (!first)
      return stop(toString(first.takeError()), 1);
    ranks = first->numRanks();
  } else {
    Expected<sched::Plan> plan = loadInput(0);
    if (!plan)
      return stop(toString(plan.takeError()), 1);
    ranks = plan->numRanks();
    kind = plan->schedule;
    planFile = std::move(*plan);
  }
  std::string self = sys::fs::getMainExecutable(
      argv[0], reinterpret_cast<void *>(&superviseElastic));
  // The attempt's own options: everything but the supervisor's, and those
  // set per attempt.
  std::vector<std::string> kept;
  for (int k = 1; k < argc; ++k) {
    StringRef a(argv[k]);
    bool drop = a == input;
    for (StringRef flag :
         {"elastic", "max-failures", "launcher", "ranks", "resume", "schedule",
          "inject-failure", "failure-stamp", "survivors", "speed-factors",
          "max-replans"})
      for (StringRef dashes : {"-", "--"}) {
        std::string f = (dashes + flag).str();
        drop |= a == f || a.starts_with(f + "=");
      }
    if (!launcher.empty())
      drop |= a.starts_with("--backend") || a.starts_with("-backend");
    if (!drop)
      kept.push_back(a.str());
  }
  // Files of this supervisor: each attempt's error output and failure
  // stamp, and the fallback plans it runs; removed at the end.
  std::vector<std::string> scratch;
  auto scratchFile = [&](StringRef prefix, StringRef suffix) {
    SmallString<128> path;
    if (sys::fs::createTemporaryFile(prefix, suffix, path))
      return std::string();
    scratch.push_back(path.str().str());
    return path.str().str();
  };
  auto cleanUp = [&](int rc) {
    for (const std::string &f : scratch)
      (void)sys::fs::remove(f);
    return rc;
  };
  std::string attemptInput = input;
  // Ranks of the first attempt still running (its numbering), to say which
  // remain.
  std::vector<int> survivors(ranks);
  for (int r = 0; r < ranks; ++r)
    survivors[r] = r;
  if (!survivorsOption.empty() && int(survivorsOption.size()) == ranks)
    survivors.assign(survivorsOption.begin(), survivorsOption.end());
  // Each rank's speed factor (a straggler's measured speed over its
  // device's), by its number in the first attempt.
  std::map<int, double> factorOf;
  for (size_t k = 0; k < speedFactors.size() && k < survivors.size(); ++k)
    factorOf[survivors[k]] = speedFactors[k];
  auto factors = [&] {
    std::vector<double> list;
    for (int r : survivors)
      list.push_back(factorOf.count(r) ? factorOf[r] : 1.0);
    if (llvm::all_of(list, [](double f) { return f == 1.0; }))
      list.clear();
    return list;
  };
  // Stragglers are watched (the attempts get --straggler-threshold) until
  // --max-replans re-plans were made for them.
  bool watch = true;
  int replans = 0;
  auto describeSurvivors = [&] {
    std::string list;
    for (int r : survivors)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    return fmt::format("{} of the first attempt", list);
  };
  bool resumeNext = resume;
  int failures = 0;
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> args;
    if (!launcher.empty()) {
      SmallVector<StringRef, 8> words;
      StringRef(launcher).split(words, ' ', -1, /*KeepEmpty=*/false);
      for (StringRef w : words) {
        std::string word = w.str();
        size_t at = word.find("{ranks}");
        if (at != std::string::npos)
          word.replace(at, 7, std::to_string(ranks));
        args.push_back(word);
      }
    }
    args.push_back(self);
    args.push_back(attemptInput);
    for (const std::string &a : kept)
      if (watch || !StringRef(a).contains("-straggler-threshold"))
        args.push_back(a);
    if (!launcher.empty())
      args.push_back("--backend=mpi");
    if (fromSpec) {
      args.push_back("--ranks=" + std::to_string(ranks));
      args.push_back("--schedule=" + kind);
      std::string list;
      for (int r : survivors)
        list += (list.empty() ? "" : ",") + std::to_string(r);
      args.push_back("--survivors=" + list);
      std::string speeds;
      for (double f : factors())
        speeds += fmt::format("{}{:.6g}", speeds.empty() ? "" : ",", f);
      if (!speeds.empty())
        args.push_back("--speed-factors=" + speeds);
    }
    if (resumeNext)
      args.push_back("--resume");
    std::string stamp;
    if (size_t(attempt) <= injections.size() &&
        !injections[attempt - 1].empty()) {
      args.push_back("--inject-failure=" + injections[attempt - 1]);
      stamp = scratchFile("stagecraft-failure", "txt");
      (void)sys::fs::remove(stamp);
      args.push_back("--failure-stamp=" + stamp);
    }
    std::string shown;
    for (const std::string &a : args)
      shown += (shown.empty() ? "" : " ") + a;
    outs() << "elastic: attempt " << attempt << " on " << ranks << " ranks ("
           << kind << "): " << shown << "\n";
    outs().flush();
    std::vector<StringRef> refs(args.begin(), args.end());
    ErrorOr<std::string> program = sys::findProgramByName(args.front());
    if (!program)
      return cleanUp(stop("cannot find " + args.front(), 1));
    std::string errFile = scratchFile("stagecraft-attempt", "err");
    std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                            StringRef(errFile)};
    std::string error;
    int rc = sys::ExecuteAndWait(*program, refs, std::nullopt, redirects, 0, 0,
                                 &error);
    double ended = epochSeconds();
    // The attempt's error output, as it would have been shown.
    std::string errText;
    if (ErrorOr<std::unique_ptr<MemoryBuffer>> text =
            MemoryBuffer::getFile(errFile))
      errText = (*text)->getBuffer().str();
    errs() << errText;
    errs().flush();
    if (rc == 0) {
      outs() << "elastic: finished after " << failures << " lost rank"
             << (failures == 1 ? "" : "s")
             << (replans ? fmt::format(" and {} re-plan{} for stragglers",
                                       replans, replans == 1 ? "" : "s")
                         : std::string())
             << "\n";
      return cleanUp(0);
    }
    if (rc == stagecraft::runtime::kExitStraggler && fromSpec) {
      // Stopped at a checkpoint for stragglers: re-plan on the same ranks
      // with the speeds they showed.
      std::string who;
      SmallVector<StringRef, 16> lines;
      StringRef(errText).split(lines, '\n');
      for (StringRef line : lines) {
        if (!line.consume_front(stagecraft::runtime::kStragglerPrefix) ||
            !line.consume_front("rank "))
          continue;
        int r = -1;
        if (line.consumeInteger(10, r) || r < 0 || r >= int(survivors.size()))
          continue;
        StringRef marker = "its measured speed is ";
        size_t at = line.find(marker);
        double f = 0.0;
        if (at == StringRef::npos ||
            line.drop_front(at + marker.size())
                .take_while([](char c) { return c != ' '; })
                .getAsDouble(f) ||
            !(f > 0.0))
          continue;
        double &factor = factorOf.try_emplace(survivors[r], 1.0).first->second;
        factor *= f;
        who += fmt::format(
            "{}rank {}{} at {:.4g} of its device's speed",
            who.empty() ? "" : ", ", r,
            survivors[r] != r
                ? fmt::format(" (rank {} of the first attempt)", survivors[r])
                : std::string(),
            factor);
      }
      if (who.empty())
        return cleanUp(stop(fmt::format("attempt {} stopped for a straggler "
                                        "but named none",
                                        attempt),
                            1));
      std::string why;
      Expected<sched::Plan> plan =
          planFor(ranks, kind, survivors, factors(), ms);
      if (!plan) {
        why = toString(plan.takeError());
        double autoMs = 0.0;
        plan = planFor(ranks, "auto", survivors, factors(), autoMs);
        if (!plan)
          return cleanUp(
              stop(fmt::format("no plan fits the measured speeds "
                               "({}): as {}: {}; as auto: {}",
                               who, kind, why, toString(plan.takeError())),
                   stagecraft::runtime::kExitStraggler));
        ms += autoMs;
        kind = "auto";
      }
      if (++replans >= maxReplans)
        watch = false;
      resumeNext = true;
      outs() << fmt::format(
          "elastic: straggler {}; re-planned for {} ranks as {} with the "
          "measured speeds and verified in {:.1f} ms{}; resuming from the "
          "checkpoint{}\n",
          who, ranks, kind, ms,
          why.empty() ? "" : " (the old kind does not apply: " + why + ")",
          watch ? ""
                : fmt::format(" (--max-replans={} reached: stragglers "
                              "are no longer watched)",
                              int(maxReplans)));
      outs().flush();
      continue;
    }
    // Under a launcher, a killed process ends the job with a signal status.
    bool lost = rc == stagecraft::runtime::kExitRankLost ||
                (!launcher.empty() && rc > 128);
    if (!lost)
      return cleanUp(
          stop(fmt::format("attempt {} failed with status {} (not "
                           "a lost rank){}",
                           attempt, rc, error.empty() ? "" : ": " + error),
               rc < 0 ? 1 : rc));
    std::optional<int> lostRank = lostRankIn(errText);
    std::string which = "a rank";
    if (lostRank && *lostRank < int(survivors.size())) {
      which = fmt::format("rank {}", *lostRank);
      if (survivors[*lostRank] != *lostRank)
        which += fmt::format(" (rank {} of the first attempt)",
                             survivors[*lostRank]);
      survivors.erase(survivors.begin() + *lostRank);
    } else {
      // Not named (a launcher that says nothing): re-planned as if the last
      // rank were lost; the count is what matters without devices.
      which = "a rank (not named; taken as the last)";
      survivors.pop_back();
    }
    std::string detected;
    if (!stamp.empty())
      if (ErrorOr<std::unique_ptr<MemoryBuffer>> text =
              MemoryBuffer::getFile(stamp)) {
        double fired = 0.0;
        if (!(*text)->getBuffer().trim().getAsDouble(fired))
          detected = fmt::format("; every rank stopped {:.2f} s after the "
                                 "injected failure",
                                 ended - fired);
      }
    if (++failures > maxFailures)
      return cleanUp(
          stop(fmt::format("stopping after {} lost rank{} (--max-failures={}); "
                           "surviving ranks: {}",
                           failures, failures == 1 ? "" : "s", int(maxFailures),
                           describeSurvivors()),
               stagecraft::runtime::kExitRankLost));
    if (ranks - 1 < 1)
      return cleanUp(stop("no rank is left to re-plan on",
                          stagecraft::runtime::kExitRankLost));
    std::string why, how;
    if (fromSpec) {
      // Re-plan for the survivors: the same kind where it still applies.
      Expected<sched::Plan> plan =
          planFor(ranks - 1, kind, survivors, factors(), ms);
      if (!plan) {
        why = toString(plan.takeError());
        double autoMs = 0.0;
        plan = planFor(ranks - 1, "auto", survivors, factors(), autoMs);
        if (!plan)
          return cleanUp(
              stop(fmt::format("no plan fits the {} surviving ranks ({}): as "
                               "{}: {}; as auto: {}",
                               ranks - 1, describeSurvivors(), kind, why,
                               toString(plan.takeError())),
                   stagecraft::runtime::kExitRankLost));
        ms += autoMs;
        kind = "auto";
      }
      how = fmt::format("re-planned for {} ranks as {} and verified in {:.1f} "
                        "ms",
                        ranks - 1, kind, ms);
    } else {
      // The plan file's precomputed fallback: no compiler at run time.
      auto t0 = std::chrono::steady_clock::now();
      const sched::Plan *fallback = nullptr;
      std::string held;
      for (const sched::Plan &f : planFile->fallbacks) {
        held += (held.empty() ? "" : ", ") + std::to_string(f.numRanks());
        if (f.numRanks() == ranks - 1)
          fallback = &f;
      }
      bool onDevices =
          !planFile->ranks.empty() && !planFile->ranks[0].device.empty();
      if (!fallback)
        return cleanUp(stop(
            onDevices
                ? fmt::format("no precomputed plan for the {} surviving "
                              "ranks ({}) in {}: a plan on devices(...) "
                              "holds none (the lost rank decides the "
                              "survivors' devices); run --elastic on the "
                              "spec",
                              ranks - 1, describeSurvivors(), input)
                : fmt::format("no precomputed plan for the {} surviving ranks "
                              "({}) in {} "
                              "(it holds fallbacks for {} ranks); write more "
                              "with stagecraft-translate --pipe-to-plan "
                              "--fallbacks=K, or run --elastic on the spec",
                              ranks - 1, describeSurvivors(), input,
                              held.empty() ? "no" : held),
            stagecraft::runtime::kExitRankLost));
      attemptInput = scratchFile("stagecraft-fallback", "json");
      std::error_code ec;
      raw_fd_ostream os(attemptInput, ec);
      if (ec)
        return cleanUp(
            stop("cannot write " + attemptInput + ": " + ec.message(), 1));
      os << sched::writePlan(*fallback);
      os.close();
      ms = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - t0)
               .count();
      kind = fallback->schedule;
      how = fmt::format("took the precomputed plan for {} ranks ({}, "
                        "verified when it was written) in {:.1f} ms",
                        ranks - 1, kind, ms);
    }
    ranks -= 1;
    resumeNext = stagecraft::runtime::hasCheckpoint(checkpointDir);
    outs() << fmt::format(
        "elastic: lost {} (status {}){}; {}{}; {}\n", which, rc, detected, how,
        why.empty() ? "" : " (the old kind does not apply: " + why + ")",
        resumeNext ? "resuming from the last checkpoint"
                   : "no checkpoint yet: starting over");
    outs().flush();
  }
}

int main(int argc, char **argv) {
  stagecraft::addVersionPrinter();
  // --help lists Stagecraft's options only (LLVM's back-end options are
  // linked in but mean nothing here).
  cl::HideUnrelatedOptions({&runCategory, &trainCategory});
  cl::ParseCommandLineOptions(argc, argv, "Stagecraft pipeline runtime\n");
  commandLine = stagecraft::runtime::quoteCommandLine(argc, argv);
  if (elastic)
    return superviseElastic(argc, argv);
  if (backend != "local" && backend != "mpi" && backend != "cuda") {
    errs() << "stagecraft-run: error: unknown --backend=" << backend
           << "; expected local, mpi or cuda\n";
    return 1;
  }
  if (backend == "cuda" && launchedByMpi()) {
#if !defined(STAGECRAFT_HAVE_MPI) || !defined(STAGECRAFT_HAVE_NCCL)
    errs() << "stagecraft-run: error: --backend=cuda under mpirun needs MPI "
              "and NCCL, and this build lacks one; run without mpirun (one "
              "thread per rank on the visible GPUs)\n";
    return 1;
#endif
  } else if (backend == "local" || backend == "cuda") {
    return run(0);
  }
#ifdef STAGECRAFT_HAVE_MPI
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = run(rank);
  if (rc != 0 && rc != stagecraft::runtime::kExitStraggler) {
    errs().flush();
    // Let other failing ranks print their reports before the job ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  MPI_Finalize();
  return rc;
#else
  errs() << "stagecraft-run: error: this build has no MPI (install "
            "libopenmpi-dev and reconfigure)\n";
  return 1;
#endif
}
