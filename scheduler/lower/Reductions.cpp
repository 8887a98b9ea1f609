//===- Reductions.cpp - Data-parallel reductions in a plan ----------------===//
//
// Where a rank's stream reduces each of its stages' gradients over the
// data-parallel group (Plan.h: placeReductions, checkReductions).
//
//===----------------------------------------------------------------------===//

#include "scheduler/lower/Plan.h"

#include <fmt/format.h>

#include <map>

using namespace stagecraft::pipe::sched;

/// The stage whose gradient \p op completes a part of, or -1.
static int gradientStage(const PlanOp &op) {
  if (op.kind != PlanOp::Kind::Compute)
    return -1;
  switch (op.action.kind) {
  case ActionKind::Backward:
  case ActionKind::BackwardWeight:
    return op.action.stage;
  case ActionKind::ForwardBackward:
    return op.action.backwardStage;
  default:
    return -1;
  }
}

static bool isReduction(const PlanOp &op) {
  return op.kind == PlanOp::Kind::Reduce || op.kind == PlanOp::Kind::ReduceWait;
}

void stagecraft::pipe::sched::placeReductions(Plan &plan) {
  for (PlanRank &rank : plan.ranks)
    placeReductions(rank.ops);
}

void stagecraft::pipe::sched::placeReductions(std::vector<PlanOp> &stream) {
  std::vector<PlanOp> ops;
  std::map<int, size_t> last; // stage -> index in ops of its last gradient
  for (PlanOp &op : stream) {
    if (isReduction(op))
      continue;
    if (int stage = gradientStage(op); stage >= 0)
      last[stage] = ops.size();
    ops.push_back(std::move(op));
  }
  std::map<size_t, std::vector<int>> after;
  for (auto [stage, at] : last)
    after[at].push_back(stage);
  stream.clear();
  for (size_t at = 0; at < ops.size(); ++at) {
    stream.push_back(std::move(ops[at]));
    for (int stage : after[at]) {
      PlanOp reduce;
      reduce.kind = PlanOp::Kind::Reduce;
      reduce.stage = stage;
      stream.push_back(reduce);
    }
  }
  // Waited for in the order posted (receives from a peer match in that
  // order).
  for (auto &[at, stages] : after)
    for (int stage : stages) {
      PlanOp wait;
      wait.kind = PlanOp::Kind::ReduceWait;
      wait.stage = stage;
      stream.push_back(wait);
    }
}

bool stagecraft::pipe::sched::hasReductions(llvm::ArrayRef<PlanOp> stream) {
  return llvm::any_of(stream, isReduction);
}

bool stagecraft::pipe::sched::hasReductions(const Plan &plan) {
  return llvm::any_of(
      plan.ranks, [](const PlanRank &rank) { return hasReductions(rank.ops); });
}

llvm::Error stagecraft::pipe::sched::checkReductions(const Plan &plan) {
  if (!hasReductions(plan))
    return llvm::Error::success();
  auto fail = [&](int rank, int stage, const std::string &what) {
    std::string name =
        stage >= 0 && stage < static_cast<int>(plan.stageNames.size())
            ? "@" + plan.stageNames[stage]
            : fmt::format("{}", stage);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("rank {}, stage {}: {}", rank, name, what));
  };
  for (int r = 0; r < plan.numRanks(); ++r) {
    const std::vector<PlanOp> &ops = plan.ranks[r].ops;
    std::map<int, size_t> last, reduce, wait;
    for (size_t at = 0; at < ops.size(); ++at) {
      const PlanOp &op = ops[at];
      if (int stage = gradientStage(op); stage >= 0)
        last[stage] = at;
      if (!isReduction(op))
        continue;
      if (op.stage < 0 || op.stage >= static_cast<int>(plan.stageNames.size()))
        return fail(r, op.stage, "a reduction of a stage the plan lacks");
      std::map<int, size_t> &seen =
          op.kind == PlanOp::Kind::Reduce ? reduce : wait;
      if (!seen.emplace(op.stage, at).second)
        return fail(r, op.stage,
                    fmt::format("instruction {} is its second {}", at,
                                op.kind == PlanOp::Kind::Reduce
                                    ? "reduce"
                                    : "reduce-wait"));
    }
    for (auto [stage, at] : reduce)
      if (!last.count(stage))
        return fail(r, stage,
                    "reduced on a rank with none of its gradient "
                    "actions");
    for (auto [stage, at] : last) {
      auto posted = reduce.find(stage);
      if (posted == reduce.end())
        return fail(r, stage, "its gradients are never reduced");
      if (posted->second < at)
        return fail(r, stage,
                    fmt::format("reduced at instruction {}, before its last "
                                "gradient action (instruction {})",
                                posted->second, at));
      auto done = wait.find(stage);
      if (done == wait.end() || done->second < posted->second)
        return fail(r, stage,
                    "its reduction is never waited for after it "
                    "is posted");
    }
    for (auto [stage, at] : wait)
      if (!reduce.count(stage))
        return fail(r, stage, "a reduce-wait without its reduce");
  }
  return llvm::Error::success();
}
