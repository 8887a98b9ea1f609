//===- ListScheduler.cpp - Memory-aware greedy list scheduling ------------===//
//
// Event-driven: event times are task ends and the moments their outputs reach
// another rank (end + latency). At each event every free rank picks one ready
// action by the policy, repeatedly until nobody can start anything at that
// time. Forwards and backwards of a stage go in microbatch order; W runs in
// the order its I ran.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/ListScheduler.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <queue>

using namespace stagecraft::pipe::sched;

namespace {
constexpr double kEps = 1e-9;

class ListBuilder {
public:
  ListBuilder(const Problem &problem, llvm::ArrayRef<int> placement,
              const ListPolicy &policy)
      : problem(problem), placement(placement), policy(policy),
        n(problem.numStages()), mbs(problem.microbatches), p(problem.ranks),
        hosted(p), laterActivation(n, 0.0),
        finishF(static_cast<size_t>(n) * mbs, -1.0),
        finishG(static_cast<size_t>(n) * mbs, -1.0), nextF(n, 0), nextG(n, 0),
        freeAt(p, 0.0), live(p, 0.0), reserved(p, 0.0), inFlight(p, 0),
        remaining(static_cast<size_t>(p) * mbs, -1), pendingW(p) {
    for (int s = 0; s < n; ++s)
      hosted[placement[s]].push_back(s);
    Problem::Edges edges = problem.edges();
    inputs = std::move(edges.inputs);
    consumers = std::move(edges.consumers);
    for (int r = 0; r < p; ++r) {
      double later = 0.0;
      for (auto it = hosted[r].rbegin(); it != hosted[r].rend(); ++it) {
        laterActivation[*it] = later;
        later += problem.stages[*it].activation;
      }
    }
  }

  llvm::Expected<Schedule> run();

private:
  double limit(int r) const {
    return policy.memoryLimit.empty() ? std::numeric_limits<double>::infinity()
                                      : policy.memoryLimit[r];
  }
  double latency(int from, int to) const {
    return placement[from] == placement[to] ? 0.0 : problem.latency;
  }
  size_t at(int s, int m) const { return static_cast<size_t>(s) * mbs + m; }
  bool readyF(int s, int m, double t) const {
    for (int i : inputs[s]) {
      double f = finishF[at(i, m)];
      if (!(f >= 0.0 && f + latency(i, s) <= t + kEps))
        return false;
    }
    return true;
  }
  bool readyG(int s, int m, double t) const {
    double f = finishF[at(s, m)];
    if (f < 0.0 || f > t + kEps)
      return false;
    for (int c : consumers[s]) {
      double g = finishG[at(c, m)];
      if (!(g >= 0.0 && g + latency(c, s) <= t + kEps))
        return false;
    }
    return true;
  }
  bool isNewOnRank(int r, int m) const {
    return remaining[static_cast<size_t>(r) * mbs + m] < 0;
  }
  bool memoryAllows(int r, int s, int m) const {
    if (!isNewOnRank(r, m))
      return true; // Room was reserved when the microbatch arrived.
    if (!policy.maxInFlight.empty() && inFlight[r] >= policy.maxInFlight[r])
      return false;
    double need = problem.stages[s].activation + laterActivation[s];
    return live[r] + reserved[r] + need <= limit(r) + kEps;
  }
  /// Picks and starts one action on rank \p r at time \p t.
  bool step(int r, double t);
  /// `step` when the policy fixes the order of F and I/B.
  bool stepBackbone(int r, double t);
  void start(int r, Action a, double t);

  const Problem &problem;
  llvm::ArrayRef<int> placement;
  const ListPolicy &policy;
  const int n, mbs, p;
  std::vector<std::vector<int>> hosted;
  /// The stage graph: each stage's inputs and consumers.
  std::vector<std::vector<int>> inputs, consumers;
  std::vector<double> laterActivation;
  std::vector<double> finishF, finishG;
  std::vector<int> nextF, nextG;
  std::vector<double> freeAt, live, reserved;
  std::vector<int> inFlight;
  /// Per (rank, microbatch): hosted stages whose last backward has not run;
  /// -1 before the microbatch reaches the rank.
  std::vector<int> remaining;
  std::vector<std::deque<std::pair<int, int>>> pendingW;
  /// (time, rank): when a rank may be able to start something: its own task
  /// ends, or an input it waits for arrives. Only those ranks are visited
  /// at that time, so the walk is linear in the actions, not ranks x actions.
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::vector<int> visitStamp;
  Schedule schedule;
  size_t started = 0;
  std::vector<size_t> backboneNext;
};
} // namespace

void ListBuilder::start(int r, Action a, double t) {
  const Stage &stage = problem.stages[a.stage];
  double cost = 0.0;
  size_t slot = static_cast<size_t>(r) * mbs + a.microbatch;
  switch (a.kind) {
  case ActionKind::Forward:
    cost = stage.forward;
    if (isNewOnRank(r, a.microbatch)) {
      int count = 0;
      for (int s : hosted[r])
        count += s >= a.stage;
      remaining[slot] = count;
      ++inFlight[r];
      reserved[r] += laterActivation[a.stage];
    } else {
      reserved[r] -= stage.activation;
    }
    live[r] += stage.activation;
    finishF[at(a.stage, a.microbatch)] = t + cost;
    ++nextF[a.stage];
    break;
  case ActionKind::BackwardInput:
    cost = stage.backwardInput;
    if (a.stage == hosted[r].front())
      --inFlight[r];
    live[r] -= stage.activation - stage.weightGrad;
    finishG[at(a.stage, a.microbatch)] = t + cost;
    ++nextG[a.stage];
    pendingW[r].push_back({a.stage, a.microbatch});
    break;
  case ActionKind::BackwardWeight:
  case ActionKind::Backward:
    if (a.kind == ActionKind::Backward) {
      cost = stage.backward();
      if (a.stage == hosted[r].front())
        --inFlight[r];
      live[r] -= stage.activation;
      finishG[at(a.stage, a.microbatch)] = t + cost;
      ++nextG[a.stage];
    } else {
      cost = stage.backwardWeight;
      live[r] -= stage.weightGrad;
      pendingW[r].pop_front();
    }
    --remaining[slot];
    break;
  case ActionKind::ForwardBackward:
  case ActionKind::AttentionForward:
  case ActionKind::AttentionBackward:
    llvm_unreachable("the list scheduler runs F, I, W and B only");
  }
  schedule.ranks[r].push_back(a);
  freeAt[r] = t + cost;
  events.push({t + cost, r});
  // The ranks whose next action this one feeds.
  if (a.kind == ActionKind::Forward)
    for (int c : consumers[a.stage])
      events.push({t + cost + latency(a.stage, c), placement[c]});
  if (a.kind == ActionKind::BackwardInput || a.kind == ActionKind::Backward)
    for (int i : inputs[a.stage])
      events.push({t + cost + latency(a.stage, i), placement[i]});
  ++started;
}

bool ListBuilder::step(int r, double t) {
  if (!policy.backbone.empty())
    return stepBackbone(r, t);
  // Ready backward: oldest microbatch first, then the later stage.
  int gStage = -1;
  for (int s : hosted[r]) {
    int m = nextG[s];
    if (m < mbs && readyG(s, m, t) &&
        (gStage < 0 || m < nextG[gStage] || (m == nextG[gStage] && s > gStage)))
      gStage = s;
  }
  // Ready forward that memory admits.
  int fStage = -1;
  for (int s : hosted[r]) {
    int m = nextF[s];
    if (m >= mbs || !readyF(s, m, t) || !memoryAllows(r, s, m))
      continue;
    if (fStage < 0 || (policy.laterStageFirst ? s > fStage : s < fStage))
      fStage = s;
  }
  bool hasW = !pendingW[r].empty();
  if (hasW && !policy.deferWeights) {
    auto [s, m] = pendingW[r].front();
    start(r, {ActionKind::BackwardWeight, s, m}, t);
    return true;
  }
  ActionKind backward =
      policy.splitBackward ? ActionKind::BackwardInput : ActionKind::Backward;
  if (gStage >= 0 && (policy.backwardFirst || fStage < 0)) {
    start(r, {backward, gStage, nextG[gStage]}, t);
    return true;
  }
  if (fStage >= 0) {
    start(r, {ActionKind::Forward, fStage, nextF[fStage]}, t);
    return true;
  }
  if (hasW) {
    auto [s, m] = pendingW[r].front();
    start(r, {ActionKind::BackwardWeight, s, m}, t);
    return true;
  }
  return false;
}

bool ListBuilder::stepBackbone(int r, double t) {
  const std::vector<Action> &order = policy.backbone[r];
  size_t &next = backboneNext[r];
  if (next < order.size()) {
    const Action &a = order[next];
    bool ready = a.kind == ActionKind::Forward
                     ? readyF(a.stage, a.microbatch, t) &&
                           memoryAllows(r, a.stage, a.microbatch)
                     : readyG(a.stage, a.microbatch, t);
    if (ready) {
      ++next;
      start(r, a, t);
      return true;
    }
  }
  if (pendingW[r].empty())
    return false;
  auto [s, m] = pendingW[r].front();
  start(r, {ActionKind::BackwardWeight, s, m}, t);
  return true;
}

llvm::Expected<Schedule> ListBuilder::run() {
  backboneNext.assign(p, 0);
  if (!policy.backbone.empty()) {
    // The backbone fixes each stage's order; keep nextF/nextG consistent by
    // letting `start` advance them as actions run in backbone order.
    if (static_cast<int>(policy.backbone.size()) != p)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "backbone must give one order per rank");
  }
  for (int r = 0; r < p; ++r) {
    double need = 0.0;
    for (int s : hosted[r])
      need += problem.stages[s].activation;
    if (hosted[r].empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     fmt::format("rank {} hosts no stage", r));
    if (need > limit(r) + kEps)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("memory limit {} on rank {} is below the {} one "
                      "microbatch needs there",
                      limit(r), r, need));
  }
  schedule.placement.assign(placement.begin(), placement.end());
  schedule.ranks.resize(p);
  const size_t total =
      static_cast<size_t>(n) * mbs * (policy.splitBackward ? 3 : 2);
  for (int r = 0; r < p; ++r)
    events.push({0.0, r});
  visitStamp.assign(p, -1);
  std::vector<int> visit;
  for (int round = 0; started < total; ++round) {
    if (events.empty())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("list scheduling stalled after {} of {} actions: the "
                      "memory limits leave no rank able to start anything",
                      started, total));
    double t = events.top().first;
    visit.clear();
    while (!events.empty() && events.top().first <= t + kEps) {
      int r = events.top().second;
      events.pop();
      if (visitStamp[r] != round) {
        visitStamp[r] = round;
        visit.push_back(r);
      }
    }
    // Rank order as before: lower ranks pick first at a tie.
    std::sort(visit.begin(), visit.end());
    for (bool progress = true; progress;) {
      progress = false;
      for (int r : visit)
        if (freeAt[r] <= t + kEps && step(r, t))
          progress = true;
    }
  }
  if (llvm::Error err = verifySchedule(problem, schedule))
    return std::move(err);
  return std::move(schedule);
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::listSchedule(const Problem &problem,
                                      llvm::ArrayRef<int> placement,
                                      const ListPolicy &policy) {
  return ListBuilder(problem, placement, policy).run();
}
