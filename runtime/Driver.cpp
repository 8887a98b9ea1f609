//===- Driver.cpp - A run as stagecraft-run drives it ---------------------===//
//
// Options checked, the plan loaded (or compiled through the front end's
// PlanSource), memory and durations checked, the backend run, the report
// printed: everything `stagecraft-run` does for one run.
//
//===----------------------------------------------------------------------===//

#include "runtime/Driver.h"
#include "runtime/Options.h"
#include "runtime/Runtime.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <optional>

#ifdef STAGECRAFT_HAVE_MPI
#include <mpi.h>
#endif

using namespace llvm;
using namespace stagecraft::runtime;
namespace sched = stagecraft::pipe::sched;
namespace kernels = stagecraft::kernels;

[[maybe_unused]] static const char *kNoCuda =
    "this build has no cuda backend (nvcc was not found when it was "
    "configured)";

bool stagecraft::runtime::launchedByMpi() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *size = std::getenv(var); size && std::atoi(size) > 1)
      return true;
  return false;
}

Error stagecraft::runtime::checkMemory(const sched::Plan &plan, int mpiRank,
                                       const TrainOptions *training,
                                       StringRef maxMemory) {
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
  if (mpiRank < 0 && training) {
    // Every replica's ranks run in this process.
    slots *= training->replicas;
    model *= training->replicas;
  }
  if (slots + model <= *limit)
    return Error::success();
  return createStringError(
      inconvertibleErrorCode(),
      fmt::format("this run needs about {:.4g} bytes ({:.4g} in buffer slots, "
                  "largest {}{}), above --max-memory={} ({:.4g} bytes); raise "
                  "it if the machine has the memory",
                  slots + model, slots, largest,
                  training ? fmt::format("; {:.4g} for the model", model) : "",
                  maxMemory.str(), *limit));
}

Expected<sched::Plan> stagecraft::runtime::loadPlan(const DriverOptions &o,
                                                    const PlanSource &source,
                                                    int64_t minMessageBytes) {
  auto compileInput = [&](int64_t bytes) -> Expected<sched::Plan> {
    if (!source.compile)
      return createStringError(inconvertibleErrorCode(),
                               o.input + ": this front end runs plan files "
                                         "only; it compiles no spec");
    PlanRequest request;
    request.kind = o.scheduleKind;
    request.chunks = o.chunks;
    request.ranks = o.ranks;
    request.survivors = o.survivors;
    request.speedFactors = o.speedFactors;
    request.minMessageBytes = bytes;
    return source.compile(request);
  };
  if (StringRef(o.input).ends_with(".mlir") || !o.scheduleKind.empty()) {
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
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(o.input);
  if (!file)
    return createStringError(file.getError(), "cannot read " + o.input + ": " +
                                                  file.getError().message());
  Expected<sched::Plan> plan = sched::readPlan((*file)->getBuffer());
  if (!plan)
    return createStringError(inconvertibleErrorCode(),
                             o.input + ": " + toString(plan.takeError()));
  return plan;
}

/// What --data-parallel runs with, and what it does not (yet).
static Error checkDataParallel(const DriverOptions &o) {
  auto refuse = [&](const std::string &why) {
    return createStringError(
        inconvertibleErrorCode(),
        fmt::format("--data-parallel={}: {}", o.dataParallel, why));
  };
  if (o.dataParallel < 1)
    return refuse("expected a number of replicas, at least 1");
  if (o.sharding != "none" && o.sharding != "full" && o.sharding != "hybrid")
    return createStringError(
        inconvertibleErrorCode(),
        "--sharding=" + o.sharding +
            ": expected none (whole replicas), full (each replica keeps a "
            "slice of the weights and optimizer state) or hybrid (the same "
            "within groups of --shard-group replicas)");
  if (o.sharding != "none" && o.dataParallel == 1)
    return createStringError(inconvertibleErrorCode(),
                             "--sharding=" + o.sharding +
                                 " shards over replicas: give "
                                 "--data-parallel=N with N of at least 2");
  if ((o.sharding == "hybrid") != (o.shardGroup != 0))
    return createStringError(inconvertibleErrorCode(),
                             "--shard-group=G goes with --sharding=hybrid, "
                             "and --sharding=hybrid needs it");
  if (o.sharding == "hybrid" &&
      (o.shardGroup < 1 || o.dataParallel % o.shardGroup != 0))
    return refuse(fmt::format("--shard-group={} must divide the replicas "
                              "(groups of consecutive replicas)",
                              o.shardGroup));
  if (o.sharding != "none" &&
      (o.clipGradNorm > 0.0 || !o.injectNonFinite.empty() ||
       !o.injectFailure.empty() || o.rejoinAt >= 0))
    return refuse("--sharding=" + o.sharding +
                  " runs without --clip-grad-norm, --inject-nonfinite, "
                  "--inject-failure and --rejoin-at (not combined yet)");
  if (o.dataParallel == 1)
    return Error::success();
  if (!o.train)
    return refuse("replicas train: it needs --train");
  if (o.backend == "cuda" || o.modelCode == "device")
    return refuse("replicas train the reference model on local and mpi; the "
                  "cuda backend and --model=device do not reduce gradients "
                  "yet");
  if (o.profile)
    return refuse("--profile measures one replica's stages; drop "
                  "--data-parallel");
  if (!o.injectSlowdown.empty() || o.stragglerThreshold || o.overlapSteps)
    return refuse("--inject-slowdown, --straggler-threshold and "
                  "--overlap-steps run on one replica only (not combined "
                  "with replicas yet)");
  if (!o.injectFailure.empty()) {
    TrainOptions t;
    if (Error err = parseInjectedFailure(o.injectFailure, t))
      return err;
    if (t.inject != TrainOptions::Inject::Kill)
      return refuse("--inject-failure=" + o.injectFailure +
                    ": with replicas, a failure is a rank that dies (kill)");
    if (o.backend != "local")
      return refuse("--inject-failure: a replica that fails leaves and the "
                    "others go on on the local backend only (under mpirun, "
                    "Open MPI ends the job when a process dies)");
    if (o.rejoinAt >= 0 &&
        (o.rejoinAt <= t.injectStep || o.rejoinAt >= o.steps))
      return refuse(fmt::format(
          "--rejoin-at={}: the replica restarts after it failed at step {} "
          "and before the last step, so from a step in {}..{}",
          o.rejoinAt, t.injectStep, t.injectStep + 1, o.steps - 1));
  }
  if (o.rejoinAt >= 0 && o.injectFailure.empty())
    return refuse("--rejoin-at restarts the replica of --inject-failure; "
                  "give one");
  return Error::success();
}

int stagecraft::runtime::runDriver(const DriverOptions &o,
                                   const PlanSource &source, int rank) {
  auto fail = [&](Error err) {
    std::string message = toString(std::move(err));
    errs() << "stagecraft-run: error: " << message << "\n";
    // A lost rank is re-plannable; anything else is bad input or a bug.
    return StringRef(message).contains(kRankLostPrefix) ? kExitRankLost : 1;
  };
  Expected<double> unit = parseDuration(o.timeUnit, "time-unit");
  if (!unit)
    return fail(unit.takeError());
  Expected<double> limit = parseDuration(o.timeout, "timeout");
  if (!limit)
    return fail(limit.takeError());
  if (Error err = checkDataParallel(o))
    return fail(std::move(err));
  TrainOptions training;
  if (o.train) {
    training.model.hidden = o.hidden;
    training.model.heads = o.heads;
    training.model.sequence = o.sequence;
    training.model.vocab = o.vocab;
    training.model.batch = o.batch;
    training.model.seed = o.seed;
    training.steps = o.steps;
    training.replicas = o.dataParallel;
    training.rejoinAt = o.rejoinAt;
    // The sequential reference keeps whole replicas; with shard groups it
    // sums in their order, as the sharded run does.
    training.sharded = o.sharding != "none" && !o.reference;
    training.shardGroup = o.sharding == "hybrid" ? o.shardGroup : 0;
    training.dumpGrads = o.dumpGrads;
    training.dumpWeights = o.dumpWeights;
    if (!o.injectFailure.empty()) {
      if (StringRef(o.injectFailure).contains(','))
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure=" + o.injectFailure +
                ": a run takes one failure; a list is for --elastic"));
      if (Error err = parseInjectedFailure(o.injectFailure, training))
        return fail(std::move(err));
      if (o.reference || o.backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure runs on the local and mpi backends"));
      if (training.inject == TrainOptions::Inject::Checkpoint &&
          o.checkpointDir.empty())
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-failure=" + o.injectFailure +
                ": a failure while checkpointing needs --checkpoint-dir"));
      training.failureStamp = o.failureStamp;
    }
    if (!o.injectSlowdown.empty()) {
      if (Error err = parseInjectedSlowdown(o.injectSlowdown, training))
        return fail(std::move(err));
      if (o.reference || o.backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--inject-slowdown runs on the local and mpi backends"));
    }
    if (!std::isfinite(o.clipGradNorm) || o.clipGradNorm < 0.0)
      return fail(createStringError(
          inconvertibleErrorCode(),
          fmt::format("--clip-grad-norm={} must be a finite number >= 0 (0: "
                      "no clipping)",
                      o.clipGradNorm)));
    if (!o.injectNonFinite.empty())
      if (Error err = parseInjectedNonFinite(o.injectNonFinite, training))
        return fail(std::move(err));
    const bool checks =
        o.clipGradNorm > 0.0 || o.overlapSteps || !o.injectNonFinite.empty();
    if (checks && o.backend == "cuda")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--clip-grad-norm, --overlap-steps and --inject-nonfinite run on "
          "the local and mpi backends (the cuda backend does not exchange "
          "the ranks' gradient checks)"));
    if (checks && o.modelCode == "device")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--clip-grad-norm, --overlap-steps and --inject-nonfinite change "
          "the reference stages' gradients and weights; --model=device keeps "
          "its own in device memory"));
    if (o.overlapSteps && o.reference)
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--overlap-steps overlaps the pipeline's steps; --reference runs "
          "one sequence with none to overlap"));
    training.clipGradNorm = o.clipGradNorm;
    training.overlapSteps = o.overlapSteps;
    training.identity.assign(o.survivors.begin(), o.survivors.end());
    if (o.stragglerThreshold) {
      if (!(*o.stragglerThreshold > 1.0) ||
          !std::isfinite(*o.stragglerThreshold))
        return fail(createStringError(
            inconvertibleErrorCode(),
            fmt::format("--straggler-threshold={} must be above 1 (a factor "
                        "over the reference rank's time per unit)",
                        *o.stragglerThreshold)));
      if (o.stragglerSteps < 1)
        return fail(createStringError(
            inconvertibleErrorCode(),
            fmt::format("--straggler-steps={} must be at least 1",
                        o.stragglerSteps)));
      if (o.checkpointDir.empty() || o.reference || o.backend == "cuda")
        return fail(createStringError(
            inconvertibleErrorCode(),
            "--straggler-threshold stops at a checkpoint: it needs "
            "--checkpoint-dir and runs on the local and mpi backends"));
      training.stragglerThreshold = *o.stragglerThreshold;
      training.stragglerSteps = o.stragglerSteps;
    }
    training.checkpointDir = o.checkpointDir;
    training.resume = o.resume;
    if (o.checkpointEvery < 0)
      return fail(createStringError(
          inconvertibleErrorCode(),
          fmt::format("--checkpoint-every={} must be at least 1",
                      o.checkpointEvery)));
    if ((o.checkpointEvery > 0 || o.resume) && o.checkpointDir.empty())
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--checkpoint-every and --resume need --checkpoint-dir=DIR"));
    // With a folder, at least the final state is kept.
    training.checkpointEvery =
        o.checkpointDir.empty()
            ? 0
            : (o.checkpointEvery > 0 ? o.checkpointEvery : int(o.steps));
    if (!o.checkpointDir.empty() && o.modelCode == "device")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "checkpoints save the reference stages' weights; --model=device "
          "keeps its own in device memory and is not checkpointed yet"));
    if (!o.checkpointDir.empty() && o.backend == "cuda")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "checkpoints run on the local and mpi backends (and --reference), "
          "not on cuda"));
    if (o.modelCode != "reference" && o.modelCode != "device")
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--model=" + o.modelCode +
                                        ": expected reference or device"));
    if (o.modelCode == "device" && o.backend == "cuda")
      return fail(createStringError(
          inconvertibleErrorCode(),
          "--model=device is for local and mpi: the cuda backend always "
          "trains the device model"));
    training.deviceModel = o.modelCode == "device";
    training.optimizer.lr = o.lr;
    if (o.optimizer == "adamw")
      training.optimizer.kind =
          stagecraft::kernels::OptimizerConfig::Kind::AdamW;
    else if (o.optimizer != "sgd")
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--optimizer=" + o.optimizer +
                                        ": expected sgd or adamw"));
    // Sizes first: message sizes below are products of them.
    if (Error err = checkTrainOptions(training))
      return fail(std::move(err));
  }
  if (o.profile) {
    if (!o.train)
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--profile needs --train"));
    if (!source.profile)
      return fail(createStringError(inconvertibleErrorCode(),
                                    "--profile measures a spec's stages; "
                                    "this front end compiles no spec"));
    StringRef output =
        o.profile->empty() ? StringRef("-") : StringRef(*o.profile);
    Error err = Error::success();
    if (o.backend == "cuda") {
#ifdef STAGECRAFT_HAVE_CUDA
      err = withCudaStages([&](const stagecraft::kernels::StageFactory &where) {
        return source.profile(training.model, o.steps, output, where);
      });
#else
      err = createStringError(inconvertibleErrorCode(), kNoCuda);
#endif
    } else {
      err = source.profile(training.model, o.steps, output,
                           kernels::hostStages());
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
  Expected<sched::Plan> plan =
      loadPlan(o, source, o.train ? trainingMessageBytes(training.model) : 64);
  if (!plan)
    return fail(plan.takeError());
  training.model.microbatches = plan->microbatches;
  if (o.train && !plan->stageInputs.empty()) {
    // A branching model (StageGraph): the reference model's pieces joined
    // along the sequence, on the host.
    auto refuse = [&](const std::string &why) {
      return fail(createStringError(inconvertibleErrorCode(),
                                    "training a branching pipeline: " + why));
    };
    if (o.modelCode == "device" || o.backend == "cuda")
      return refuse("it trains the reference model on the host (local and "
                    "mpi), not the device model");
    if (!plan->lengths.empty())
      return refuse("microbatches of different lengths are not combined "
                    "with branches yet");
    // Messages hold the longest sequence (a join's).
    if (StringRef(o.input).ends_with(".mlir") || !o.scheduleKind.empty()) {
      stagecraft::kernels::ModelConfig longest = training.model;
      longest.sequence = stageGraph(*plan, o.sequence).longest();
      if (Error err = longest.validate())
        return fail(std::move(err));
      plan = loadPlan(o, source, trainingMessageBytes(longest));
      if (!plan)
        return fail(plan.takeError());
    }
  }
  if (o.train && !plan->lengths.empty()) {
    // Each microbatch trains at its own sequence length; messages and the
    // position table are sized for the longest.
    auto refuse = [&](const std::string &why) {
      return fail(createStringError(inconvertibleErrorCode(),
                                    "training on lengths(...): " + why));
    };
    if (o.sequenceGiven)
      return refuse("the spec gives each microbatch's sequence length; drop "
                    "--seq");
    if (o.modelCode == "device" || o.backend == "cuda")
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
    if (Error err = checkTrainOptions(training))
      return fail(std::move(err));
    // A spec is planned again with messages that hold the longest
    // microbatch (a plan file must have been written with them).
    if (StringRef(o.input).ends_with(".mlir") || !o.scheduleKind.empty()) {
      plan = loadPlan(o, source, trainingMessageBytes(training.model));
      if (!plan)
        return fail(plan.takeError());
    }
  }
  if (!o.train)
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
                  r, i, describePlanAction(*plan, op.action), op.cost, *unit,
                  seconds, kMaxDurationSeconds)));
      }
  if (Error err =
          checkMemory(*plan, o.backend == "mpi" ? rank % plan->numRanks() : -1,
                      o.train ? &training : nullptr, o.maxMemory))
    return fail(std::move(err));
  RunOptions options;
  options.exec.timeUnit = *unit;
  options.exec.train = o.train ? &training : nullptr;
  options.timeout = *limit;
  options.commandLine = o.commandLine;
  options.tracePath = o.tracePath;
  options.cudaTransport = o.cudaTransport;
  if (o.killRank >= 0 && o.killRank == rank)
    options.exec.killAfter = o.killAfter;
  if (o.reference && !o.train)
    return fail(createStringError(inconvertibleErrorCode(),
                                  "--reference needs --train"));

  if (!o.calibrate.empty() &&
      (o.reference || !StringRef(o.input).ends_with(".mlir") ||
       !source.calibrate))
    return fail(createStringError(
        inconvertibleErrorCode(),
        "--calibrate writes the spec with the costs this run measures: it "
        "needs a spec (.mlir), not a plan file, and a pipelined run, not "
        "--reference"));
  auto sequentialRun = [&]() -> Expected<RunReport> {
    if (o.backend != "cuda")
      return runReference(*plan, training, hostStagesFor(training));
#ifdef STAGECRAFT_HAVE_CUDA
    std::optional<RunReport> result;
    if (Error err = withCudaStages(
            [&](const stagecraft::kernels::StageFactory &where) -> Error {
              auto r = runReference(*plan, training, where);
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
  Expected<RunReport> report =
      o.reference            ? sequentialRun()
      : o.backend == "local" ? runLocal(*plan, options)
      : o.backend == "cuda"
#if defined(STAGECRAFT_HAVE_MPI) && defined(STAGECRAFT_HAVE_NCCL)
          ? (launchedByMpi() ? runCudaMpi(*plan, options)
                             : runCuda(*plan, options))
#elif defined(STAGECRAFT_HAVE_CUDA)
          ? runCuda(*plan, options)
#else
          ? Expected<RunReport>(
                createStringError(inconvertibleErrorCode(), kNoCuda))
#endif
#ifdef STAGECRAFT_HAVE_MPI
          : runMpi(*plan, options);
#else
          : Expected<RunReport>(createStringError(inconvertibleErrorCode(),
                                                  "this build has no MPI"));
#endif
  if (!report)
    return fail(report.takeError());
  // Stopped for a straggler: rank 0 exits with the status that says
  // "re-plan with the speeds measured", after printing the straggler lines.
  // The other ranks' part is done and they exit 0: under mpirun a non-zero
  // exit ends the job, which could end rank 0 before it printed.
  const int status = report->stoppedAt >= 0 ? kExitStraggler : 0;
  if (rank != 0)
    return 0;
  outs() << formatRunReport(*plan, *report, options,
                            o.reference ? std::string("sequential reference")
                                        : std::string(o.backend));
  for (const auto &[k, why] : report->departures)
    outs() << fmt::format("replica {} left the data-parallel group: {}\n", k,
                          why);
  for (const MembershipChange &change : report->membershipChanges) {
    if (!change.ranAgain) {
      outs() << fmt::format("from step {}, {} replicas again: the restarted "
                            "replica took the weights and optimizer state of "
                            "one that stayed\n",
                            change.step, change.replicas);
      continue;
    }
    const int step = change.step;
    outs() << fmt::format("step {} ran again on the {} replica(s) still "
                          "there, renumbered",
                          step, change.replicas);
    // The time the failure cost: that step against the median step.
    const std::vector<double> &ends = report->stepEnds;
    const int at = step - report->firstStep;
    std::vector<double> others;
    for (int k = 0; k < static_cast<int>(ends.size()); ++k)
      if (k != at)
        others.push_back(ends[k] - (k ? ends[k - 1] : 0.0));
    if (at >= 0 && at < static_cast<int>(ends.size()) && !others.empty()) {
      std::sort(others.begin(), others.end());
      const double median = others[others.size() / 2];
      const double took = ends[at] - (at ? ends[at - 1] : 0.0);
      outs() << fmt::format("; it took {:.1f} ms with both runs, against a "
                            "median step of {:.1f} ms: {:.1f} ms lost to the "
                            "failure",
                            took * 1e3, median * 1e3, (took - median) * 1e3);
    }
    outs() << "\n";
  }
  if (o.train && o.dataParallel > 1)
    outs() << fmt::format(
        "data parallel: {} replicas of {} ranks, each on {} microbatches; "
        "{}{}\n",
        o.dataParallel, plan->numRanks(), plan->microbatches,
        !training.sharded
            ? std::string("each stage's gradients averaged over the "
                          "replicas from its last weight gradient on, while "
                          "the step goes on") +
                  (training.shardGroup
                       ? fmt::format(", summed within groups of {} "
                                     "replicas, then across the groups",
                                     training.shardGroup)
                       : std::string())
        : training.shardGroup
            ? fmt::format(
                  "hybrid: each replica keeps 1/{0} of every stage's "
                  "weights and AdamW moments, shared with its group of {0} "
                  "replicas, gathers the weights within the group before the "
                  "stage's first action, reduce-scatters its gradients "
                  "within the group from its last on and all-reduces its "
                  "slice across the groups",
                  training.shardGroup)
            : std::string(
                  "sharded: each replica keeps 1/N of every stage's weights "
                  "and AdamW moments, gathers the weights before the "
                  "stage's first action and reduce-scatters its gradients "
                  "from its last on, while the step goes on"),
        o.reference ? std::string(" (replica after replica here)")
                    : fmt::format("; the tables above are replica {}'s",
                                  report->reportingReplica));
  // The spec's degree is the job's shape; a run here may take fewer.
  if (o.train && plan->dataParallel > 1 && o.dataParallel != plan->dataParallel)
    outs() << fmt::format(
        "note: the plan was written for {} replicas (data_parallel, sharding "
        "{}); this run trains {} (--data-parallel={})\n",
        plan->dataParallel, plan->sharding, o.dataParallel, o.dataParallel);
  if (o.train && !o.dumpGrads.empty()) {
    std::error_code ec;
    raw_fd_ostream os(o.dumpGrads + "/losses.txt", ec);
    if (ec)
      return fail(
          createStringError(ec, "cannot write " + o.dumpGrads + "/losses.txt"));
    for (double loss : report->losses)
      os << format("%.9g\n", loss);
  }
  if (!o.calibrate.empty()) {
    Expected<Calibration> fitted = calibrate(
        *plan, *report, options.exec.train && options.exec.train->overlapSteps);
    if (!fitted)
      return fail(fitted.takeError());
    outs() << describeCalibration(*plan, *fitted);
    if (Error err = source.calibrate(*fitted, o.calibrate))
      return fail(std::move(err));
    outs() << "calibrated costs (milliseconds per microbatch) written to "
           << o.calibrate << "; run or schedule that spec with "
           << "--time-unit=1ms\n";
  }
  if (!o.tracePath.empty()) {
    if (Error err = writeRunTrace(*plan, *report, options))
      return fail(std::move(err));
    outs() << "trace written to " << o.tracePath << "\n";
  }
  if (status != 0) {
    outs().flush();
    for (const Straggler &s : report->stragglers)
      errs() << describeStraggler(s, report->stoppedAt, training.identity)
             << "\n";
  }
  return status;
}
