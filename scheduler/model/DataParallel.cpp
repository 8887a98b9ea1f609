//===- DataParallel.cpp - A pipeline inside data parallelism --------------===//

#include "scheduler/model/DataParallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace stagecraft::pipe::sched;

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Whether \p a computes (part of) a gradient of \p stage: its W, its B,
/// or the backward half of an overlapped F&B.
bool gradientOf(const Action &a, int stage) {
  if (a.kind == ActionKind::ForwardBackward)
    return a.backwardStage == stage;
  return a.stage == stage && (a.kind == ActionKind::BackwardWeight ||
                              a.kind == ActionKind::Backward);
}

bool forwardOf(const Action &a, int stage) {
  return a.stage == stage && (a.kind == ActionKind::Forward ||
                              a.kind == ActionKind::ForwardBackward);
}

/// The collective time of gathering \p bytes of weights, and of reducing
/// \p bytes of gradient, under \p dp.
double gatherTime(const DataParallel &dp, double bytes) {
  if (dp.sharding == DataParallel::Sharding::None)
    return 0.0;
  int n =
      dp.sharding == DataParallel::Sharding::Full ? dp.degree : dp.shardGroup;
  return reduceScatterTime(bytes, n, dp.latency, dp.bandwidth);
}

double reduceTime(const DataParallel &dp, double bytes) {
  switch (dp.sharding) {
  case DataParallel::Sharding::None:
    return allReduceTime(bytes, dp.degree, dp.latency, dp.bandwidth);
  case DataParallel::Sharding::Full:
    return reduceScatterTime(bytes, dp.degree, dp.latency, dp.bandwidth);
  case DataParallel::Sharding::Hybrid:
    return reduceScatterTime(bytes, dp.shardGroup, dp.latency, dp.bandwidth) +
           allReduceTime(bytes / dp.shardGroup, dp.degree / dp.shardGroup,
                         dp.interLatency, dp.interBandwidth);
  }
  return 0.0;
}

/// The part of a rank's gradient it updates in its optimizer step.
double updatedShare(const DataParallel &dp) {
  switch (dp.sharding) {
  case DataParallel::Sharding::None:
    return 1.0;
  case DataParallel::Sharding::Full:
    return 1.0 / dp.degree;
  case DataParallel::Sharding::Hybrid:
    return 1.0 / dp.shardGroup;
  }
  return 1.0;
}

} // namespace

llvm::Error
stagecraft::pipe::sched::validateDataParallel(const Problem &problem,
                                              const DataParallel &dp) {
  if (dp.degree < 1)
    return fail(
        fmt::format("data-parallel degree {} must be at least 1", dp.degree));
  if (dp.sharding == DataParallel::Sharding::Hybrid &&
      (dp.shardGroup < 1 || dp.degree % dp.shardGroup != 0))
    return fail(fmt::format("hybrid sharding: a shard group of {} does not "
                            "divide the data-parallel degree {}",
                            dp.shardGroup, dp.degree));
  if (dp.gradBytes.size() != static_cast<size_t>(problem.numStages()))
    return fail(fmt::format("data parallelism gives gradient bytes for {} "
                            "stages; the pipeline has {}",
                            dp.gradBytes.size(), problem.numStages()));
  for (size_t s = 0; s < dp.gradBytes.size(); ++s)
    if (!std::isfinite(dp.gradBytes[s]) || dp.gradBytes[s] < 0.0)
      return fail(fmt::format("stage {}: gradient bytes {} must be finite "
                              "and >= 0",
                              s, dp.gradBytes[s]));
  for (double x : {dp.bandwidth, dp.interBandwidth})
    if (!std::isfinite(x) || x <= 0.0)
      return fail(fmt::format("data-parallel bandwidth {} must be finite "
                              "and > 0",
                              x));
  for (double x : {dp.latency, dp.interLatency, dp.optimizerPerByte})
    if (!std::isfinite(x) || x < 0.0)
      return fail(fmt::format("data-parallel latency and optimizer time "
                              "must be finite and >= 0, got {}",
                              x));
  return llvm::Error::success();
}

llvm::StringRef
stagecraft::pipe::sched::shardingName(DataParallel::Sharding sharding) {
  switch (sharding) {
  case DataParallel::Sharding::None:
    return "none";
  case DataParallel::Sharding::Full:
    return "full";
  case DataParallel::Sharding::Hybrid:
    return "hybrid";
  }
  return "none";
}

llvm::Expected<DataParallel::Sharding>
stagecraft::pipe::sched::parseSharding(llvm::StringRef name) {
  for (auto s : {DataParallel::Sharding::None, DataParallel::Sharding::Full,
                 DataParallel::Sharding::Hybrid})
    if (name == shardingName(s))
      return s;
  return fail(fmt::format("sharding '{}' is not one of none, full, hybrid",
                          name.str()));
}

double DataParallelTimeline::maxExposed() const {
  return exposed.empty() ? 0.0
                         : *std::max_element(exposed.begin(), exposed.end());
}

double stagecraft::pipe::sched::allReduceTime(double bytes, int ranks,
                                              double latency,
                                              double bandwidth) {
  if (ranks <= 1 || bytes <= 0.0)
    return 0.0;
  return 2.0 * (ranks - 1) * (latency + bytes / ranks / bandwidth);
}

double stagecraft::pipe::sched::reduceScatterTime(double bytes, int ranks,
                                                  double latency,
                                                  double bandwidth) {
  if (ranks <= 1 || bytes <= 0.0)
    return 0.0;
  return (ranks - 1) * (latency + bytes / ranks / bandwidth);
}

llvm::Expected<DataParallelTimeline>
stagecraft::pipe::sched::simulateDataParallel(
    const Problem &problem, const Schedule &schedule, const Timeline &timeline,
    const DataParallel &dp, const DataParallelOptions &options) {
  if (llvm::Error e = validateDataParallel(problem, dp))
    return std::move(e);
  if (!std::isfinite(options.bucketBytes))
    return fail("bucket bytes must be finite");
  const int p = problem.ranks;
  const int n = problem.numStages();
  const bool sharded = dp.sharding != DataParallel::Sharding::None;
  DataParallelTimeline out;
  out.computeEnd.assign(p, 0.0);
  out.commEnd.assign(p, 0.0);
  out.exposed.assign(p, 0.0);
  out.heldBytes.assign(p, 0.0);
  out.ops.resize(p);
  // Each stage's first forward start and its last gradient action.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> firstForward(n, inf);
  std::vector<const TimedAction *> lastGradient(n, nullptr);
  for (int r = 0; r < p; ++r)
    for (const TimedAction &t : timeline.ranks[r]) {
      out.computeEnd[r] = std::max(out.computeEnd[r], t.end);
      // Only the action's own stages can match (its backward half's too).
      for (int s : {t.action.stage, t.action.backwardStage}) {
        if (s < 0 || s >= n)
          continue;
        if (forwardOf(t.action, s))
          firstForward[s] = std::min(firstForward[s], t.start);
        if (gradientOf(t.action, s) &&
            (!lastGradient[s] || t.end > lastGradient[s]->end))
          lastGradient[s] = &t;
      }
    }
  // Sharded: every stage's weights gathered from the step's start, in the
  // order of first use on its rank; the compute waits (uniformly, so that
  // no dependency moves) for the latest.
  std::vector<std::vector<int>> stagesOf(p);
  for (int s = 0; s < n; ++s)
    stagesOf[schedule.placement[s]].push_back(s);
  std::vector<double> channelFree(p, 0.0);
  if (sharded)
    for (int r = 0; r < p; ++r) {
      std::vector<int> order = stagesOf[r];
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return firstForward[a] < firstForward[b];
      });
      for (int s : order) {
        DataParallelOp op{DataParallelOp::Kind::Gather, s, 0, dp.gradBytes[s]};
        op.release = op.start = channelFree[r];
        op.end = op.start + gatherTime(dp, dp.gradBytes[s]);
        channelFree[r] = op.end;
        if (std::isfinite(firstForward[s]))
          out.shift = std::max(out.shift, op.end - firstForward[s]);
        out.ops[r].push_back(op);
      }
    }
  for (double &e : out.computeEnd)
    e += out.shift;
  // The reductions, released by the placement, one at a time per rank in
  // release order.
  for (int r = 0; r < p; ++r) {
    std::vector<DataParallelOp> reductions;
    for (int s : stagesOf[r]) {
      const double bytes = dp.gradBytes[s];
      if (!lastGradient[s] || bytes <= 0.0 || dp.degree <= 1)
        continue;
      const double start = lastGradient[s]->start + out.shift;
      const double end = lastGradient[s]->end + out.shift;
      int buckets = 1;
      if (options.placement == ReducePlacement::Bucketed &&
          options.bucketBytes > 0.0)
        buckets = std::max(
            1, static_cast<int>(std::ceil(bytes / options.bucketBytes - 1e-9)));
      for (int k = 0; k < buckets; ++k) {
        DataParallelOp op{DataParallelOp::Kind::Reduce, s, k, bytes / buckets};
        op.release =
            buckets == 1 ? end : start + (end - start) * (k + 1) / buckets;
        reductions.push_back(op);
      }
    }
    std::stable_sort(reductions.begin(), reductions.end(),
                     [](const DataParallelOp &a, const DataParallelOp &b) {
                       return a.release < b.release;
                     });
    for (DataParallelOp &op : reductions) {
      op.start = std::max(op.release, channelFree[r]);
      op.end = op.start + reduceTime(dp, op.bytes);
      channelFree[r] = op.end;
      out.ops[r].push_back(op);
    }
    out.commEnd[r] = channelFree[r];
    double bytes = 0.0;
    for (int s : stagesOf[r])
      bytes += dp.gradBytes[s];
    // Weights and gradients whole; sharded, the shard besides.
    out.heldBytes[r] = 2.0 * bytes + (sharded ? bytes * updatedShare(dp) : 0.0);
    DataParallelOp opt{DataParallelOp::Kind::Optimizer, -1, 0,
                       bytes * updatedShare(dp)};
    opt.release = opt.start = std::max(out.computeEnd[r], out.commEnd[r]);
    opt.end = opt.start + dp.optimizerPerByte * opt.bytes;
    out.ops[r].push_back(opt);
    out.step = std::max(out.step, opt.end);
  }
  // Exposed: what the rank's collectives add to the step, past the
  // pipeline's last compute, and the wait for sharded weights before it.
  const double pipelineEnd =
      *std::max_element(out.computeEnd.begin(), out.computeEnd.end());
  for (int r = 0; r < p; ++r)
    out.exposed[r] = std::max(0.0, out.commEnd[r] - pipelineEnd) + out.shift;
  return out;
}

double stagecraft::pipe::sched::dataParallelLowerBound(const Problem &problem,
                                                       const Schedule &schedule,
                                                       double computeBound,
                                                       const DataParallel &dp) {
  if (llvm::Error e = validateDataParallel(problem, dp)) {
    llvm::consumeError(std::move(e));
    return computeBound;
  }
  const int n = problem.numStages();
  auto speed = [&](int s) { return problem.speedOf(schedule.placement[s]); };
  double forwards = 0.0;
  for (int s = 0; s < n; ++s)
    forwards += problem.stages[s].forward / speed(s);
  // The earliest a stage's first gradient can end: every forward, then the
  // backward inputs back to it and its own least backward.
  std::vector<double> firstGradient(n, 0.0);
  double back = 0.0;
  for (int s = n - 1; s >= 0; --s) {
    const Stage &st = problem.stages[s];
    firstGradient[s] = forwards + back + st.leastBackward() / speed(s);
    back += st.backwardInput / speed(s);
  }
  // The earliest the last gradient action of a stage can start: after its
  // first gradient and the other m - 1 (each at least its least gradient
  // action), and after its m forwards and m - 1 whole backwards (its
  // forwards start after the chain's earlier forwards). Its reductions are
  // released no sooner (a bucket at that action's start at the earliest).
  const int m = problem.microbatches;
  std::vector<double> lastGradientStart(n, 0.0);
  double before = 0.0;
  for (int s = 0; s < n; ++s) {
    const Stage &st = problem.stages[s];
    const double least = st.leastBackward() / speed(s);
    const double action = std::min(st.backward(), st.backwardWeight) / speed(s);
    const double fromForwards = (problem.isChain() ? before : 0.0) +
                                m * st.forward / speed(s) + (m - 1) * least;
    const double fromGradients = firstGradient[s] - least + (m - 1) * action;
    lastGradientStart[s] = std::max(fromForwards, fromGradients);
    before += st.forward / speed(s);
  }
  double bound = computeBound;
  double leastOptimizer = std::numeric_limits<double>::infinity();
  for (int r = 0; r < problem.ranks; ++r) {
    double work = 0.0, gathers = 0.0, reductions = 0.0, bytes = 0.0;
    double earliest = std::numeric_limits<double>::infinity();
    // (release, reduction time) of each stage's reductions on this rank.
    std::vector<std::pair<double, double>> released;
    for (int s = 0; s < n; ++s) {
      if (schedule.placement[s] != r)
        continue;
      const Stage &st = problem.stages[s];
      work += problem.microbatches * (st.forward + st.leastBackward()) /
              problem.speedOf(r);
      gathers += gatherTime(dp, dp.gradBytes[s]);
      if (dp.degree > 1) {
        // Buckets only add latency: K of them take at least the whole.
        const double time = reduceTime(dp, dp.gradBytes[s]);
        reductions += time;
        released.push_back({lastGradientStart[s], time});
      }
      bytes += dp.gradBytes[s];
      // A bucket may be released as the first gradient action starts.
      earliest =
          std::min(earliest, firstGradient[s] - st.leastBackward() / speed(s));
    }
    if (!std::isfinite(earliest))
      continue;
    // One channel, jobs with release times: it ends no sooner than any
    // release plus every reduction released at or after it.
    std::sort(released.begin(), released.end());
    double channel = std::max(earliest, gathers) + reductions;
    double after = 0.0;
    for (auto it = released.rbegin(); it != released.rend(); ++it) {
      after += it->second;
      channel = std::max(channel, it->first + after);
    }
    const double optimizer = dp.optimizerPerByte * bytes * updatedShare(dp);
    leastOptimizer = std::min(leastOptimizer, optimizer);
    bound = std::max(bound, std::max(work, channel) + optimizer);
  }
  // The rank whose compute ends last still runs its optimizer step.
  if (std::isfinite(leastOptimizer))
    bound = std::max(bound, computeBound + leastOptimizer);
  return bound;
}
