//===- Runtime.cpp - Running a plan on a backend --------------------------===//
//
// See Runtime.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runtime.h"

#include "runtime/DataParallel.h"
#include "runtime/Options.h"
#include "llvm/ADT/StringExtras.h"

#include "scheduler/formats/ChromeTrace.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <thread>

#ifdef STAGECRAFT_HAVE_MPI
#include <mpi.h>
#endif

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;

static void finish(RunReport &report) {
  report.wall = 0.0;
  report.resumeSeconds = -1.0;
  report.losses.clear();
  report.stepEnds.clear();
  report.stragglers.clear();
  if (!report.ranks.empty()) {
    report.firstStep = report.ranks.front().firstStep;
    report.stoppedAt = report.ranks.front().stoppedAt;
    // Every rank reaches the same verdicts.
    report.rollbacks = report.ranks.front().rollbacks;
    report.skippedSteps = report.ranks.front().skippedSteps;
  }
  for (const RankResult &r : report.ranks) {
    report.wall = std::max(report.wall, r.wall);
    report.resumeSeconds = std::max(report.resumeSeconds, r.resumeSeconds);
    report.stragglers.insert(report.stragglers.end(), r.stragglers.begin(),
                             r.stragglers.end());
    if (report.losses.size() < r.losses.size())
      report.losses.resize(r.losses.size(), 0.0);
    // Only the rank of the last stage reports a non-zero loss.
    for (size_t k = 0; k < r.losses.size(); ++k)
      report.losses[k] += r.losses[k];
    if (report.stepEnds.size() < r.stepEnds.size())
      report.stepEnds.resize(r.stepEnds.size(), 0.0);
    for (size_t k = 0; k < r.stepEnds.size(); ++k)
      report.stepEnds[k] = std::max(report.stepEnds[k], r.stepEnds[k]);
  }
}

llvm::Expected<RunReport>
stagecraft::runtime::runReference(const sched::Plan &plan,
                                  const TrainOptions &train,
                                  const kernels::StageFactory &where) {
  const int numStages = static_cast<int>(plan.stageNames.size());
  bool helix = std::find(plan.stageAttention.begin(), plan.stageAttention.end(),
                         true) != plan.stageAttention.end();
  RankModels models;
  if (helix) {
    // The layer-wise model with one layer per attention, in one piece that
    // stands for the last stage (it computes the loss).
    if (llvm::Error err = train.model.validate())
      return std::move(err);
    llvm::Expected<std::unique_ptr<kernels::LayerStage>> whole =
        where.make(train.model, 0, 1, 0, numStages - 1);
    if (!whole)
      return whole.takeError();
    models.stages[numStages - 1] = whole->get();
    models.all.emplace_back(numStages - 1, std::move(*whole));
  } else {
    llvm::Expected<RankModels> built = buildStages(plan, -1, train, where);
    if (!built)
      return built.takeError();
    models = std::move(*built);
  }
  std::vector<kernels::LayerStage *> stages;
  for (auto &[index, stage] : models.stages)
    stages.push_back(stage);
  const int n = static_cast<int>(stages.size());
  auto status = [&]() -> llvm::Error {
    for (kernels::LayerStage *stage : stages)
      if (llvm::Error err = stage->status())
        return err;
    return llvm::Error::success();
  };
  RunReport report;
  RankResult result;
  std::function<llvm::Error()> pass;
  // A chain: two message buffers where the stages compute, passed along.
  kernels::MessageBuffer ma(nullptr, where.release), mb(nullptr, where.release);
  // A branching model (host only): each stage's output and input gradient.
  std::vector<std::vector<float>> outputs(n), gradients(n);
  std::vector<float> in, grad;
  // (Outside the branch below: `pass` runs after it.)
  const StageGraph &g = models.graph;
  const int batch = train.model.batch, hidden = train.model.hidden;
  if (!g.empty()) {
    // Per microbatch, the forwards in the order written (inputs first),
    // then the backwards in reverse, each stage's input and output
    // gradient gathered as the pipelined run gathers them.
    if (where.where != "host")
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "a branching model trains on the host (local, mpi) only");
    pass = [&]() -> llvm::Error {
      for (int m = 0; m < plan.microbatches; ++m) {
        for (int s = 0; s < n; ++s) {
          outputs[s].assign(static_cast<size_t>(batch) * g.sequence[s] * hidden,
                            0.0f);
          stages[s]->forward(m,
                             gatherInput(
                                 g, s, batch, hidden,
                                 [&](int i) { return outputs[i].data(); }, in),
                             s + 1 < n ? outputs[s].data() : nullptr);
        }
        for (int s = n - 1; s >= 0; --s) {
          // The gradient of s's input: its inputs' outputs side by side.
          gradients[s].assign(
              static_cast<size_t>(batch) * g.sequence[s] * hidden, 0.0f);
          stages[s]->backwardInput(
              m,
              gatherOutputGradient(
                  g, s, batch, hidden,
                  [&](int c) { return gradients[c].data(); }, grad),
              g.inputs[s].empty() ? nullptr : gradients[s].data());
          stages[s]->backwardWeight(m);
        }
      }
      return status();
    };
  } else {
    ma = allocateMessage(where, train.model.messageBytes());
    mb = allocateMessage(where, train.model.messageBytes());
    if (!ma || !mb)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("cannot allocate message buffers on {}", where.where));
    pass = [&, a = ma.get(), b = mb.get()]() mutable -> llvm::Error {
      for (int m = 0; m < plan.microbatches; ++m) {
        for (int s = 0; s < n; ++s) {
          stages[s]->forward(m, s ? a : nullptr, b);
          std::swap(a, b);
        }
        for (int s = n - 1; s >= 0; --s) {
          stages[s]->backwardInput(m, s + 1 < n ? a : nullptr, b);
          stages[s]->backwardWeight(m);
          std::swap(a, b);
        }
      }
      return status();
    };
  }
  TrainHooks hooks;
  // Replicas: one after another on the same stages, each on its own
  // microbatches; their gradients and losses meet as the pipelined
  // replicas' do (runtime/DataParallel.h).
  std::vector<double> replicaLosses;
  if (train.replicas > 1) {
    kernels::StageModel *lastStage = nullptr;
    for (auto &[index, model] : models.all)
      if (index == numStages - 1)
        lastStage = model.get();
    pass = [&, whole = pass, lastStage]() -> llvm::Error {
      const int n = train.replicas, m = plan.microbatches;
      // [stage][replica]: the replica's gradients of the stage, flat.
      std::vector<std::vector<std::vector<float>>> parts(models.all.size());
      replicaLosses.assign(n, 0.0);
      for (int k = 0; k < n; ++k) {
        for (auto &[index, model] : models.all) {
          model->zeroGrad();
          model->setDataOffset(k * m);
        }
        if (llvm::Error err = whole())
          return err;
        for (size_t i = 0; i < models.all.size(); ++i)
          parts[i].push_back(flatten(models.all[i].second->parameters(),
                                     &kernels::Parameter::grad));
        if (lastStage)
          for (int mb = 0; mb < m; ++mb)
            replicaLosses[k] += lastStage->loss(mb) / m;
      }
      for (size_t i = 0; i < models.all.size(); ++i) {
        std::vector<const float *> all;
        for (const std::vector<float> &part : parts[i])
          all.push_back(part.data());
        std::vector<float> mean(parts[i][0].size());
        meanOverReplicas(all, mean.size(), mean.data(), train.shardGroup);
        std::vector<kernels::Parameter> &params =
            models.all[i].second->parameters();
        std::vector<size_t> sizes;
        for (const kernels::Parameter &param : params)
          sizes.push_back(param.grad.size());
        scatterInto(params, mean, &kernels::Parameter::grad, sizes);
      }
      return llvm::Error::success();
    };
    hooks.reduceLoss = [&](double) -> llvm::Expected<double> {
      return meanOverReplicas(replicaLosses);
    };
  }
  Clock::time_point start = Clock::now();
  hooks.firstStep = &result.firstStep;
  hooks.resumeSeconds = &result.resumeSeconds;
  hooks.skippedSteps = &result.skippedSteps;
  hooks.stepEnds = &result.stepEnds;
  hooks.now = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  if (llvm::Error err =
          trainSteps(plan, models, train, pass, result.losses, hooks))
    return std::move(err);
  where.synchronize();
  result.wall = std::chrono::duration<double>(Clock::now() - start).count();
  result.busy = result.wall;
  report.ranks.push_back(std::move(result));
  finish(report);
  return report;
}

/// Replicas as threads, each its own failure domain: a rank lost in one
/// (killed, or hanging past the timeout) stops that replica, which leaves;
/// the others go on (ReplicaSet). Any other failure fails the run.
static llvm::Expected<RunReport> runLocalReplicas(const sched::Plan &plan,
                                                  const RunOptions &options,
                                                  int replicas) {
  const int p = plan.numRanks();
  LocalFabric fabric(replicas * p);
  std::vector<std::unique_ptr<ProgressMonitor>> monitors;
  for (int k = 0; k < replicas; ++k)
    monitors.push_back(std::make_unique<ProgressMonitor>(p, options.timeout));
  ReplicaSet membership(replicas, p);
  Clock::time_point start = Clock::now();
  std::vector<llvm::Expected<RankResult>> results;
  for (int w = 0; w < replicas * p; ++w)
    results.emplace_back(RankResult{});
  // --rejoin-at: the results of the restarted replica's ranks.
  std::vector<llvm::Expected<RankResult>> rejoined;
  auto rank = [&](int w, int joinAt, llvm::Expected<RankResult> &into) {
    const int k = w / p, r = w % p;
    std::unique_ptr<Communicator> world = fabric.communicator(w);
    MemberCommunicator pipeline(*world, replicaMembers(k, p), r);
    MemberCommunicator group(*world, groupMembers(r, p, replicas), k);
    ExecOptions exec = options.exec;
    exec.ranksAreThreads = true;
    exec.replica = k;
    exec.replicaGroup = &group;
    exec.membership = &membership;
    exec.joinAt = joinAt;
    into = executeRank(plan, r, pipeline, *monitors[k], start, exec);
    if (!into) {
      // Its replica stops (the failure aborted its monitor) and leaves.
      llvm::Error err = into.takeError();
      std::string message = llvm::toString(std::move(err));
      monitors[k]->abort();
      membership.leave(k);
      into = llvm::createStringError(llvm::inconvertibleErrorCode(), message);
    }
    // What it sent is all it will send.
    fabric.close(w);
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < replicas * p; ++w)
    threads.emplace_back([&, w] { rank(w, -1, results[w]); });
  const TrainOptions &train = *options.exec.train;
  std::string restartError;
  if (train.rejoinAt >= 0 && train.injectRank >= 0) {
    // The replica of the injected failure restarts once it is out of the
    // list, on channels emptied of what its first run left, and joins
    // again (ReplicaSet::join).
    const int k = train.injectRank / p;
    for (int r = 0; r < p; ++r)
      threads[k * p + r].join();
    bool failed = false;
    for (int r = 0; r < p; ++r)
      failed |= !static_cast<bool>(results[k * p + r]);
    if (failed && !membership.waitGone(k, options.timeout))
      restartError = fmt::format("replica {} could not restart: the others "
                                 "did not end the step it left in within {} s",
                                 k, options.timeout);
    if (failed && restartError.empty()) {
      for (int r = 0; r < p; ++r)
        fabric.reopen(k * p + r);
      monitors[k] = std::make_unique<ProgressMonitor>(p, options.timeout);
      for (int r = 0; r < p; ++r)
        rejoined.emplace_back(RankResult{});
      for (int r = 0; r < p; ++r)
        threads.emplace_back(
            [&, k, r] { rank(k * p + r, train.rejoinAt, rejoined[r]); });
    }
  }
  for (std::thread &t : threads)
    if (t.joinable())
      t.join();
  // Failures: replicas whose rank was lost left; anything else is an error.
  std::string errors;
  int first = -1;
  std::vector<std::pair<int, std::string>> departures;
  for (int k = 0; k < replicas; ++k) {
    std::string lost, other;
    for (int r = 0; r < p; ++r) {
      llvm::Expected<RankResult> &result = results[k * p + r];
      if (result)
        continue;
      std::string message = llvm::toString(result.takeError());
      if (llvm::StringRef(message).contains(kRankLostPrefix))
        lost += (lost.empty() ? "" : "; ") + message;
      else if (!llvm::StringRef(message).contains("stopped: "))
        other += (other.empty() ? "" : "\n") + message;
    }
    if (!other.empty())
      errors += (errors.empty() ? "" : "\n") + other;
    else if (!lost.empty())
      departures.push_back({k, lost});
    else if (first < 0)
      first = k;
  }
  for (llvm::Expected<RankResult> &result : rejoined)
    if (!result)
      errors += (errors.empty() ? "" : "\n") +
                ("after its restart: " + llvm::toString(result.takeError()));
  if (!restartError.empty())
    errors += (errors.empty() ? "" : "\n") + restartError;
  if (!errors.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), errors);
  if (first < 0) {
    std::string why;
    for (const auto &[k, lost] : departures)
      why += (why.empty() ? "" : "\n") + lost;
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  }
  RunReport report;
  double wall = 0.0;
  for (int w = 0; w < replicas * p; ++w)
    if (results[w])
      wall = std::max(wall, results[w]->wall);
  for (int r = 0; r < p; ++r)
    report.ranks.push_back(std::move(*results[first * p + r]));
  finish(report);
  report.wall = std::max(report.wall, wall);
  report.reportingReplica = first;
  report.membershipChanges = report.ranks.front().membershipChanges;
  report.departures = std::move(departures);
  return report;
}

llvm::Expected<RunReport>
stagecraft::runtime::runLocal(const sched::Plan &plan,
                              const RunOptions &options) {
  const int p = plan.numRanks();
  const int replicas = options.exec.train ? options.exec.train->replicas : 1;
  if (replicas > 1)
    return runLocalReplicas(plan, options, replicas);
  LocalFabric fabric(p);
  ProgressMonitor monitor(p, options.timeout);
  Clock::time_point start = Clock::now();
  return runRankThreads(p, [&](int r) {
    std::unique_ptr<Communicator> comm = fabric.communicator(r);
    ExecOptions exec = options.exec;
    exec.ranksAreThreads = true;
    return executeRank(plan, r, *comm, monitor, start, exec);
  });
}

llvm::Expected<RunReport> stagecraft::runtime::runRankThreads(
    int ranks, llvm::function_ref<llvm::Expected<RankResult>(int)> rank) {
  std::vector<llvm::Expected<RankResult>> results;
  for (int r = 0; r < ranks; ++r)
    results.emplace_back(RankResult{});
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { results[r] = rank(r); });
  for (std::thread &t : threads)
    t.join();
  RunReport report;
  // The ranks that failed first; those stopped because of them add nothing.
  std::string errors, stopped;
  for (llvm::Expected<RankResult> &result : results) {
    if (result) {
      report.ranks.push_back(std::move(*result));
      continue;
    }
    std::string message = llvm::toString(result.takeError());
    std::string &into =
        message.find("stopped: another rank failed") != std::string::npos
            ? stopped
            : errors;
    into += (into.empty() ? "" : "\n") + message;
  }
  if (errors.empty())
    errors = stopped;
  // A lost rank is the cause; the others' stalls follow from it.
  std::string lost;
  for (llvm::StringRef line : llvm::split(errors, '\n'))
    if (line.contains(kRankLostPrefix) && !line.contains(" sent nothing for "))
      lost += (lost.empty() ? "" : "\n") + line.str();
  if (!lost.empty())
    errors = lost;
  if (!errors.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), errors);
  finish(report);
  return report;
}

#ifdef STAGECRAFT_HAVE_MPI
Clock::time_point stagecraft::runtime::commonStart() {
  int size = 0, nodeSize = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  MPI_Comm_size(node, &nodeSize);
  MPI_Comm_free(&node);
  MPI_Barrier(MPI_COMM_WORLD);
  Clock::time_point start = Clock::now();
  if (nodeSize != size)
    return start;
  // One host: one monotonic clock, so rank 0's reading is everyone's
  // origin (a process that left the barrier late would otherwise measure
  // from later and see its actions early).
  int64_t origin = start.time_since_epoch().count();
  MPI_Bcast(&origin, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  return Clock::time_point(Clock::duration(origin));
}

llvm::Expected<RunReport>
stagecraft::runtime::runMpi(const sched::Plan &plan,
                            const RunOptions &options) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int p = plan.numRanks();
  const int replicas = options.exec.train ? options.exec.train->replicas : 1;
  if (size != replicas * p)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format(
            "rank {}: {}", rank,
            replicas > 1
                ? fmt::format("{} replicas of the plan's {} ranks need {} "
                              "MPI processes, not {}; launch with: {}",
                              replicas, p, replicas * p, size,
                              mpirunCommand(replicas * p, options.commandLine))
                : processCountError(p, size, options.commandLine)));
  std::unique_ptr<Communicator> world = createMpiCommunicator();
  // Rank r of replica k is process k x p + r (one replica: the same).
  MemberCommunicator pipeline(*world, replicaMembers(rank / p, p), rank % p);
  MemberCommunicator group(*world, groupMembers(rank % p, p, replicas),
                           rank / p);
  ExecOptions exec = options.exec;
  if (replicas > 1) {
    exec.replica = rank / p;
    exec.replicaGroup = &group;
    exec.watchIndex = rank;
  }
  ProgressMonitor monitor(size, options.timeout);
  Clock::time_point start = commonStart();
  llvm::Expected<RankResult> result =
      executeRank(plan, rank % p, pipeline, monitor, start, exec);
  if (!result)
    return result.takeError();
  // Every replica has the same losses: replica 0's are reported.
  if (rank >= p)
    std::fill(result->losses.begin(), result->losses.end(), 0.0);
  return gatherMpiReport(std::move(*result), p);
}

RunReport stagecraft::runtime::gatherMpiReport(RankResult mine, int keepRanks) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Gather: fixed figures, then the measured actions.
  constexpr int kFigures = 7;
  double figures[kFigures] = {mine.busy,
                              mine.wall,
                              mine.waiting,
                              static_cast<double>(mine.instructions),
                              mine.overhead,
                              static_cast<double>(mine.activationPeak),
                              mine.dataParallelExposed};
  std::vector<double> all(kFigures * size);
  MPI_Gather(figures, kFigures, MPI_DOUBLE, all.data(), kFigures, MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  std::vector<double> measured;
  for (const MeasuredAction &a : mine.actions) {
    measured.push_back(a.index);
    measured.push_back(a.start);
    measured.push_back(a.end);
  }
  int count = static_cast<int>(measured.size());
  std::vector<int> counts(size), offsets(size, 0);
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += counts[r];
  }
  std::vector<double> actions(rank == 0 ? total : 0);
  MPI_Gatherv(measured.data(), count, MPI_DOUBLE, actions.data(), counts.data(),
              offsets.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<double> losses(mine.losses.size(), 0.0);
  MPI_Reduce(mine.losses.data(), losses.data(), static_cast<int>(losses.size()),
             MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  // Every rank ran the same steps (a failure ends the job).
  std::vector<double> stepEnds(mine.stepEnds.size(), 0.0);
  MPI_Reduce(mine.stepEnds.data(), stepEnds.data(),
             static_cast<int>(stepEnds.size()), MPI_DOUBLE, MPI_MAX, 0,
             MPI_COMM_WORLD);
  RunReport report;
  if (rank != 0) {
    report.stoppedAt = mine.stoppedAt;
    report.ranks.push_back(std::move(mine));
    return report;
  }
  for (int r = 0; r < size; ++r) {
    RankResult rr;
    rr.rank = r;
    rr.busy = all[kFigures * r];
    rr.wall = all[kFigures * r + 1];
    rr.waiting = all[kFigures * r + 2];
    rr.instructions = static_cast<size_t>(all[kFigures * r + 3]);
    rr.overhead = all[kFigures * r + 4];
    rr.activationPeak = static_cast<int64_t>(all[kFigures * r + 5]);
    rr.dataParallelExposed = all[kFigures * r + 6];
    rr.firstStep = mine.firstStep; // the same checkpoint on every rank
    rr.resumeSeconds = mine.resumeSeconds;
    rr.stoppedAt = mine.stoppedAt; // every rank is told the same
    rr.rollbacks = mine.rollbacks; // and reaches the same verdicts
    rr.skippedSteps = mine.skippedSteps;
    if (r == 0)
      rr.stragglers = mine.stragglers;
    for (int k = offsets[r]; k + 2 < offsets[r] + counts[r]; k += 3)
      rr.actions.push_back(
          {static_cast<int>(actions[k]), actions[k + 1], actions[k + 2]});
    report.ranks.push_back(std::move(rr));
  }
  double wall = 0.0;
  for (const RankResult &r : report.ranks)
    wall = std::max(wall, r.wall);
  if (keepRanks >= 0 && keepRanks < size)
    report.ranks.resize(keepRanks);
  finish(report);
  report.wall = std::max(report.wall, wall);
  report.losses = std::move(losses);
  report.stepEnds = std::move(stepEnds);
  return report;
}
#endif

/// The simulated span of \p plan in its units: the most any rank takes from
/// its first compute's start to its last compute's end (the step when
/// steps overlap).
static double simulatedSpan(const sched::Plan &plan) {
  double span = 0.0;
  for (int r = 0;
       r < plan.numRanks() && r < static_cast<int>(plan.simulatedStart.size());
       ++r) {
    const std::vector<double> &starts = plan.simulatedStart[r];
    double first = std::numeric_limits<double>::infinity(), last = 0.0;
    size_t k = 0;
    for (const sched::PlanOp &op : plan.ranks[r].ops) {
      if (op.kind != sched::PlanOp::Kind::Compute || k >= starts.size())
        continue;
      first = std::min(first, starts[k]);
      last = std::max(last, starts[k] + op.cost);
      ++k;
    }
    if (k > 0)
      span = std::max(span, last - first);
  }
  return span;
}

std::string stagecraft::runtime::formatRunReport(const sched::Plan &plan,
                                                 const RunReport &report,
                                                 const RunOptions &options,
                                                 llvm::StringRef backend) {
  const double unitMs = options.exec.timeUnit * 1e3;
  const double simulated = plan.simulatedMakespan * unitMs;
  const bool train = options.exec.train != nullptr;
  const bool sequential = backend == "sequential reference";
  // Every figure below is per step; a run of several training steps adds
  // the totals on one line of their own.
  // Steps run: a resumed run starts at its checkpoint's step.
  const int steps =
      train ? std::max(1, (report.stoppedAt >= 0 ? report.stoppedAt
                                                 : options.exec.train->steps) -
                              report.firstStep)
            : 1;
  const double wallMs = report.wall * 1e3;
  std::string out;
  if (sequential)
    out += fmt::format("ran the sequential reference of @{}: one thread, "
                       "microbatch by microbatch, no pipeline (so no ranks, "
                       "instructions or simulation)\n",
                       plan.pipeline);
  else
    out +=
        fmt::format("ran @{} for @{} on {} ranks, {} backend\n", plan.schedule,
                    plan.pipeline, plan.numRanks(), backend.str());
  if (!sequential)
    out += fmt::format(
        "units: measured = wall-clock ms; simulated = the spec's cost units x "
        "--time-unit (1 unit = {:.6g} ms){}\n",
        unitMs,
        train ? "; the spec's costs are estimates unless --profile measured "
                "them, so compare the two only then"
              : "");
  std::string perStep =
      train ? fmt::format("per step (mean of {})", steps) : "one step";
  if (sequential)
    out += fmt::format("{}: measured {:.3f} ms\n", perStep, wallMs / steps);
  else
    out += fmt::format("{}: measured {:.3f} ms, simulated {:.3f} ms, "
                       "measured / simulated {:.4f}\n",
                       perStep, wallMs / steps, simulated,
                       simulated > 0 ? wallMs / steps / simulated : 1.0);
  if (train)
    out += fmt::format("all {} steps: measured {:.3f} ms\n", steps, wallMs);
  // The steady state: the step-to-step time once the pipeline is full,
  // against the simulated span (what a step costs when steps overlap) and
  // makespan (with a barrier between steps).
  if (train && !sequential && report.stepEnds.size() >= 3) {
    std::vector<double> gaps;
    for (size_t k = 1; k < report.stepEnds.size(); ++k)
      gaps.push_back((report.stepEnds[k] - report.stepEnds[k - 1]) * 1e3);
    std::sort(gaps.begin(), gaps.end());
    const double median = gaps[gaps.size() / 2];
    const double span =
        (plan.simulatedSpan > 0.0 ? plan.simulatedSpan : simulatedSpan(plan)) *
        unitMs;
    out += fmt::format(
        "steady state ({}; the plan minimizes the {}): median step {:.3f} "
        "ms over steps {}..{} (range {:.3f}..{:.3f}); simulated span {:.3f} "
        "ms, makespan {:.3f} ms\n",
        options.exec.train->overlapSteps ? "steps overlap"
                                         : "a barrier between steps",
        plan.objective, median, report.firstStep + 1,
        report.firstStep + static_cast<int>(report.stepEnds.size()) - 1,
        gaps.front(), gaps.back(), span, simulated);
  }
  if (train && (report.rollbacks > 0 || report.skippedSteps > 0))
    out += fmt::format("gradient checks: {} step(s) rolled back and run again "
                       "(--overlap-steps), {} update(s) skipped for a "
                       "non-finite gradient\n",
                       report.rollbacks, report.skippedSteps);
  size_t instructions = 0;
  double overhead = 0.0;
  if (!sequential) {
    out += fmt::format("per rank, {}:\n", train ? "per step" : "in the step");
    out += fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>12}  {:>10}\n",
                       "rank", "busy ms", "busy ms", "wait ms", "instructions",
                       "overhead");
    out += fmt::format("{:>5}  {:>10}  {:>10}  {:>10}  {:>12}  {:>10}\n", "",
                       "measured", "simulated", "measured", "", "us/instr");
    for (const RankResult &r : report.ranks) {
      double simBusy = r.rank < static_cast<int>(plan.simulatedBusy.size())
                           ? plan.simulatedBusy[r.rank] * unitMs
                           : 0.0;
      out += fmt::format(
          "{:>5}  {:>10.3f}  {:>10.3f}  {:>10.3f}  {:>12}  {:>10.2f}\n", r.rank,
          r.busy * 1e3 / steps, simBusy, r.waiting * 1e3 / steps,
          r.instructions / steps,
          r.instructions ? r.overhead * 1e6 / r.instructions : 0.0);
      instructions += r.instructions;
      overhead += r.overhead;
    }
    if (train && options.exec.train->replicas > 1) {
      std::string perRank;
      for (const RankResult &r : report.ranks)
        perRank +=
            fmt::format("{}rank {} {:.3f} ms", perRank.empty() ? "" : ", ",
                        r.rank, r.dataParallelExposed * 1e3 / steps);
      out += fmt::format("exposed data-parallel time per step (in the "
                         "reduce-waits after the rank's last action): {}\n",
                         perRank);
    }
    // Where each rank's compute time went, by action kind.
    static const char *kKindNames[] = {"F", "I", "W", "B", "FB", "AF", "AB"};
    out += fmt::format("per rank and action kind, {}:\n",
                       train ? "per step" : "in the step");
    out += fmt::format("{:>5}  {:>4}  {:>7}  {:>12}  {:>12}\n", "rank", "kind",
                       "actions", "measured ms", "simulated ms");
    for (const RankResult &r : report.ranks) {
      if (r.rank < 0 || r.rank >= plan.numRanks())
        continue;
      std::vector<const sched::PlanOp *> computes;
      for (const sched::PlanOp &op : plan.ranks[r.rank].ops)
        if (op.kind == sched::PlanOp::Kind::Compute)
          computes.push_back(&op);
      constexpr size_t kinds = std::size(kKindNames);
      std::vector<double> measured(kinds, 0.0), simulatedMs(kinds, 0.0);
      std::vector<int> count(kinds, 0);
      for (const sched::PlanOp *op : computes) {
        size_t k = static_cast<size_t>(op->action.kind);
        if (k < kinds) {
          simulatedMs[k] += op->cost * unitMs;
          ++count[k];
        }
      }
      for (const MeasuredAction &a : r.actions)
        if (a.index >= 0 && a.index < static_cast<int>(computes.size())) {
          size_t k = static_cast<size_t>(computes[a.index]->action.kind);
          if (k < kinds)
            measured[k] += (a.end - a.start) * 1e3;
        }
      for (size_t k = 0; k < kinds; ++k)
        if (count[k] > 0)
          out += fmt::format("{:>5}  {:>4}  {:>7}  {:>12.3f}  {:>12.3f}\n",
                             r.rank, kKindNames[k], count[k],
                             measured[k] / steps, simulatedMs[k]);
    }
  }
  if (train && !sequential) {
    // Activation memory: what the stages really held at once per rank,
    // beside what the plan's order and recomputation imply for this model.
    std::vector<double> planned =
        plannedActivationPeaks(plan, options.exec.train->model);
    bool measured = !report.ranks.empty();
    for (const RankResult &r : report.ranks)
      measured &= r.activationPeak >= 0;
    if (measured && !planned.empty()) {
      int recomputed = plan.recompute.count(sched::Recompute::Full) +
                       plan.recompute.count(sched::Recompute::Selective);
      out +=
          fmt::format("activation memory per rank, bytes ({} of {} "
                      "forwards recompute):\n",
                      recomputed, plan.microbatches * plan.stageNames.size());
      out += fmt::format("{:>5}  {:>14}  {:>14}\n", "rank", "measured peak",
                         "planned peak");
      for (const RankResult &r : report.ranks)
        out += fmt::format(
            "{:>5}  {:>14}  {:>14.0f}\n", r.rank, r.activationPeak,
            r.rank < static_cast<int>(planned.size()) ? planned[r.rank] : 0.0);
    } else if (measured && (!options.exec.train->model.lengths.empty() ||
                            !plan.stageInputs.empty())) {
      // The plan scales a stage's activation linearly with the length; the
      // model's attention scores grow with its square, so no planned
      // figure is printed to compare with.
      out += fmt::format("activation memory per rank, bytes ({}: measured "
                         "only):\n",
                         plan.stageInputs.empty()
                             ? "microbatches of different lengths"
                             : "a branching model");
      for (const RankResult &r : report.ranks)
        out += fmt::format("{:>5}  {:>14}\n", r.rank, r.activationPeak);
    } else {
      out += "activation memory: not measured (helix blocks and device "
             "stages do not count it)\n";
    }
  }
  if (train) {
    const TrainOptions &t = *options.exec.train;
    if (report.resumeSeconds >= 0.0)
      out += fmt::format("resumed at step {}: the checkpoint loaded, checked "
                         "and restored in {:.1f} ms\n",
                         report.firstStep, report.resumeSeconds * 1e3);
    for (size_t k = 0; k < report.losses.size(); ++k)
      out += fmt::format("step {} loss {:.6f}{}\n", k, report.losses[k],
                         static_cast<int>(k) < report.firstStep
                             ? " (before the checkpoint resumed from)"
                             : "");
    if (report.stoppedAt >= 0)
      out += fmt::format("stopped at the checkpoint of step {} of {}: a rank "
                         "straggles (--straggler-threshold; its line is on "
                         "stderr)\n",
                         report.stoppedAt, t.steps);
    // Tokens of one step: each microbatch's own with lengths(...).
    // A branching model's microbatch: the tokens its last stage sees.
    const int perMicrobatch =
        plan.stageInputs.empty()
            ? t.model.tokens()
            : t.model.batch *
                  stageGraph(plan, t.model.sequence).sequence.back();
    double perStep = static_cast<double>(plan.microbatches) * perMicrobatch;
    std::string shape = fmt::format("{} microbatches x {} tokens",
                                    plan.microbatches, perMicrobatch);
    if (!t.model.lengths.empty()) {
      perStep = 0.0;
      for (int l : t.model.lengths)
        perStep += static_cast<double>(t.model.batch) * l;
      shape = fmt::format(
          "{} microbatches of {} tokens in all (lengths "
          "{}..{} x batch {})",
          plan.microbatches, perStep,
          *std::min_element(t.model.lengths.begin(), t.model.lengths.end()),
          t.model.sequence, t.model.batch);
    }
    double tokens = static_cast<double>(steps) * perStep;
    if (t.replicas > 1) {
      // Replicas that left stop counting from the step run again, and
      // those that joined again count from theirs.
      tokens = 0.0;
      for (int step = report.firstStep; step < report.firstStep + steps;
           ++step) {
        int replicas = t.replicas;
        for (const MembershipChange &change : report.membershipChanges)
          if (step >= change.step)
            replicas = change.replicas;
        tokens += perStep * replicas;
      }
      std::string changed;
      for (const MembershipChange &change : report.membershipChanges)
        changed +=
            fmt::format("{}{} from step {}", changed.empty() ? " (" : ", ",
                        change.replicas, change.step);
      shape = fmt::format("{} replicas{} x {}", t.replicas,
                          changed.empty() ? changed : changed + ")", shape);
    }
    out += fmt::format("trained {} steps x {} in {:.3f} s: {:.0f} tokens/s\n",
                       steps, shape, report.wall,
                       report.wall > 0 ? tokens / report.wall : 0.0);
    return out;
  }
  if (backend == "cuda")
    // Device time between kernels mixes launch gaps with waits on copies;
    // the host-side figure the other backends report has no counterpart.
    return out + fmt::format("runtime overhead not measured on the cuda "
                             "backend ({} instructions)\n",
                             instructions);
  out += fmt::format("runtime overhead {:.2f} us per instruction over {} "
                     "instructions\n",
                     instructions ? overhead * 1e6 / instructions : 0.0,
                     instructions);
  return out;
}

llvm::Error stagecraft::runtime::writeRunTrace(const sched::Plan &plan,
                                               const RunReport &report,
                                               const RunOptions &options) {
  // Both timelines in trace microseconds: measured seconds x 1e6, simulated
  // units x time unit x 1e6.
  sched::Problem names;
  names.name = plan.pipeline;
  for (const std::string &s : plan.stageNames) {
    sched::Stage stage;
    stage.name = s;
    names.stages.push_back(stage);
  }
  const std::vector<std::vector<sched::Action>> computes =
      plan.computeSchedule().ranks;
  sched::Timeline measured, simulated;
  measured.ranks.resize(plan.numRanks());
  simulated.ranks.resize(plan.numRanks());
  const double unit = options.exec.timeUnit;
  for (const RankResult &r : report.ranks)
    for (const MeasuredAction &a : r.actions)
      measured.ranks[r.rank].push_back(
          {computes[r.rank][a.index], a.start / unit, a.end / unit});
  for (int r = 0;
       r < plan.numRanks() && r < static_cast<int>(plan.simulatedStart.size());
       ++r)
    for (size_t k = 0; k < plan.simulatedStart[r].size(); ++k) {
      const sched::PlanOp *op = nullptr;
      size_t seen = 0;
      for (const sched::PlanOp &o : plan.ranks[r].ops)
        if (o.kind == sched::PlanOp::Kind::Compute && seen++ == k) {
          op = &o;
          break;
        }
      double start = plan.simulatedStart[r][k];
      simulated.ranks[r].push_back(
          {computes[r][k], start, start + (op ? op->cost : 0.0)});
    }
  sched::ChromeTraceWriter writer(unit * 1e6);
  writer.addTimeline("measured", names, measured);
  writer.addTimeline("simulated", names, simulated);
  std::error_code ec;
  llvm::raw_fd_ostream os(options.tracePath, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return llvm::createStringError(
        ec, "cannot write trace " + options.tracePath + ": " + ec.message());
  os << writer.str();
  return llvm::Error::success();
}
