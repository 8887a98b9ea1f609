//===- ScheduleByName.cpp - A schedule by kind name, with searches --------===//
//
// `scheduleByName`: a fixed kind, auto, exact or ilp, with recomputation.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/ScheduleByName.h"

#include "scheduler/policy/Library.h"
#include "scheduler/policy/PolicySearch.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ExactSearch.h"
#include "scheduler/search/IlpSearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

using namespace stagecraft::pipe::sched;

/// The fixed kind of \p request's schedule, before recomputation.
static llvm::Expected<Schedule> fixedKind(const Problem &problem,
                                          ScheduleKind kind,
                                          const KindRequest &request,
                                          RecomputePolicy policy) {
  ScheduleOptions options;
  options.kind = kind;
  options.chunks = request.chunks;
  options.folds = request.folds;
  options.recompute = policy != RecomputePolicy::None;
  options.objective = request.objective;
  return generateSchedule(problem, options);
}

Problem
stagecraft::pipe::sched::reorderedMicrobatches(const Problem &problem,
                                               llvm::ArrayRef<int> order) {
  Problem reordered = problem;
  if (problem.hasLengths())
    for (size_t k = 0; k < order.size(); ++k)
      reordered.lengths[k] = problem.lengths[order[k]];
  reordered.microbatchOrder.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k)
    reordered.microbatchOrder[k] = problem.microbatchOrder.empty()
                                       ? order[k]
                                       : problem.microbatchOrder[order[k]];
  return reordered;
}

/// A search's schedule as a result: simulated, without recomputation.
static llvm::Expected<KindResult> searched(const Problem &problem,
                                           Schedule schedule) {
  llvm::Expected<Timeline> t = simulate(problem, schedule);
  if (!t)
    return t.takeError();
  KindResult result;
  result.schedule = std::move(schedule);
  result.timeline = std::move(*t);
  result.recompute = "none";
  result.lowerBound = lowerBound(problem);
  return result;
}

static llvm::Expected<KindResult> scheduleOne(const Problem &problem,
                                              const KindRequest &request);

llvm::Expected<KindResult>
stagecraft::pipe::sched::scheduleByName(const Problem &problem,
                                        const KindRequest &request) {
  bool attention = false;
  for (const Stage &st : problem.stages)
    attention |= st.attention.has_value();
  if (request.kind != "auto" || !problem.hasLengths() || attention)
    return scheduleOne(problem, request);
  // auto with lengths: the microbatch orders below, under one memory limit.
  const int m = problem.microbatches;
  std::vector<int> given(m);
  std::iota(given.begin(), given.end(), 0);
  std::vector<int> longest = given;
  std::stable_sort(longest.begin(), longest.end(), [&](int a, int b) {
    return problem.lengths[a] > problem.lengths[b];
  });
  std::vector<int> shortest(longest.rbegin(), longest.rend());
  std::vector<int> alternating;
  for (int lo = 0, hi = m - 1; lo <= hi; ++lo, --hi) {
    alternating.push_back(longest[lo]);
    if (lo != hi)
      alternating.push_back(longest[hi]);
  }
  std::vector<std::vector<int>> orders;
  for (std::vector<int> *o : {&given, &longest, &shortest, &alternating})
    if (llvm::find(orders, *o) == orders.end())
      orders.push_back(*o);
  KindRequest each = request;
  if (each.memoryLimit <= 0.0 && !problem.hasCapacity()) {
    llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
    if (!peaks)
      return peaks.takeError();
    each.memoryLimit = *std::max_element(peaks->begin(), peaks->end());
  }
  std::optional<KindResult> best;
  std::optional<llvm::Error> firstError;
  // Each order gets an equal share of what is left, so that one running
  // over its share shortens the next; once the time is spent, the orders
  // left are skipped (the first always runs).
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < orders.size(); ++i) {
    const std::vector<int> &order = orders[i];
    double left =
        request.timeLimit -
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (i > 0 && best && left <= 0.0)
      break;
    each.timeLimit =
        std::max(left, 1e-6) / static_cast<double>(orders.size() - i);
    // A start runs the problem's microbatches: relabel them by position.
    KindRequest here = each;
    std::vector<int> position(m);
    for (int k = 0; k < m; ++k)
      position[order[k]] = k;
    for (Schedule &start : here.starts)
      for (auto &rank : start.ranks)
        for (Action &a : rank) {
          if (a.microbatch >= 0 && a.microbatch < m)
            a.microbatch = position[a.microbatch];
          if (a.backwardMicrobatch >= 0 && a.backwardMicrobatch < m)
            a.backwardMicrobatch = position[a.backwardMicrobatch];
        }
    llvm::Expected<KindResult> r =
        scheduleOne(reorderedMicrobatches(problem, order), here);
    if (!r) {
      if (!firstError)
        firstError = r.takeError();
      else
        llvm::consumeError(r.takeError());
      continue;
    }
    if (best && r->timeline.value(request.objective) >=
                    best->timeline.value(request.objective) - 1e-12)
      continue;
    best = std::move(*r);
    best->microbatchOrder = order == given ? std::vector<int>{} : order;
  }
  if (!best)
    return std::move(*firstError);
  if (firstError)
    llvm::consumeError(std::move(*firstError));
  if (!best->microbatchOrder.empty())
    best->choice += best->microbatchOrder == longest
                        ? "; microbatches longest first"
                    : best->microbatchOrder == shortest
                        ? "; microbatches shortest first"
                        : "; microbatches longest and shortest alternating";
  return std::move(*best);
}

/// The activation memory a policy's search is held to: the request's
/// limit, else 1F1B's highest peak without a capacity, else none (the
/// capacity is checked when the recomputation is planned).
static llvm::Expected<double> policyMemoryLimit(const Problem &problem,
                                                const KindRequest &request) {
  if (request.memoryLimit > 0.0 || problem.hasCapacity())
    return request.memoryLimit;
  llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
  if (!peaks)
    return peaks.takeError();
  return *std::max_element(peaks->begin(), peaks->end());
}

/// auto's policy candidates: each policy of the request (and the
/// library's) searched within the memory limit; a policy that does not
/// apply to the problem, or fits no setting, is left out.
template <typename Candidates>
static llvm::Error addPolicyCandidates(const Problem &problem,
                                       const KindRequest &request,
                                       Candidates &candidates) {
  std::vector<KindRequest::PolicyCandidate> policies = request.policies;
  if (request.libraryPolicies)
    for (const Policy &p : libraryPolicies())
      policies.push_back({p, {}});
  if (policies.empty())
    return llvm::Error::success();
  llvm::Expected<double> limit = policyMemoryLimit(problem, request);
  if (!limit)
    return limit.takeError();
  for (const KindRequest::PolicyCandidate &c : policies) {
    llvm::Expected<PolicySearchResult> found =
        searchPolicy(c.policy, problem, c.fixed, *limit, request.objective);
    if (!found) {
      llvm::consumeError(found.takeError());
      continue;
    }
    candidates.push_back(
        {"policy " + describePolicyChoice(c.policy, found->params),
         std::move(found->schedule)});
  }
  return llvm::Error::success();
}

/// kind=policy-search: the one policy of the request, its parameters set
/// by search within the memory limit, its recomputation planned.
static llvm::Expected<KindResult> searchOnePolicy(const Problem &problem,
                                                  const KindRequest &request) {
  if (request.policies.size() != 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("kind=policy-search searches one policy's parameters; "
                    "{} given (name it with policy=)",
                    request.policies.size()));
  const KindRequest::PolicyCandidate &c = request.policies.front();
  llvm::Expected<double> limit = policyMemoryLimit(problem, request);
  if (!limit)
    return limit.takeError();
  llvm::Expected<PolicySearchResult> found =
      searchPolicy(c.policy, problem, c.fixed, *limit, request.objective);
  if (!found)
    return found.takeError();
  RecomputePolicy recompute =
      request.recompute.value_or(defaultRecomputePolicy(problem));
  llvm::Expected<RecomputeOutcome> planned =
      planRecomputation(problem, found->schedule, recompute);
  if (!planned)
    return planned.takeError();
  KindResult result;
  result.schedule = std::move(found->schedule);
  result.timeline = std::move(planned->timeline);
  result.recompute = planned->chosen;
  result.choice =
      fmt::format("policy {} ({} of {} settings within memory {:g})",
                  describePolicyChoice(c.policy, found->params), found->fitting,
                  found->tried, *limit);
  result.lowerBound = lowerBound(problem);
  return result;
}

static llvm::Expected<KindResult> scheduleOne(const Problem &problem,
                                              const KindRequest &request) {
  auto fail = [](std::string message) -> llvm::Expected<KindResult> {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  KindResult result;
  if (request.kind == "exact") {
    if (request.chunks > 1)
      return fail("chunks applies to interleaved-1f1b only; the exact "
                  "search covers auto's placements");
    if (request.recompute && *request.recompute != RecomputePolicy::None)
      return fail("the exact search does not plan recomputation; use "
                  "kind=auto with recompute=");
    if (request.objective == Objective::Span) {
      // The branch-and-bound's cuts bound the makespan; the span is solved
      // by the ILP on each placement.
      if (!ilpAvailable())
        return fail("the exact search minimizes the span with the ILP, and "
                    "this build has no ILP solver (COIN-OR CBC); for "
                    "objective=span use kind=auto");
      llvm::Expected<IlpOverPlacements> exact = ilpOverPlacements(
          problem, request.memoryLimit, request.timeLimit, request.objective);
      if (!exact)
        return exact.takeError();
      llvm::Expected<KindResult> r = searched(problem, exact->schedule);
      if (r) {
        r->spanBound = exact->bound;
        r->choice =
            exact->optimal
                ? fmt::format("span optimal over auto's {} placements ({}; by "
                              "the ILP)",
                              exact->placements, exact->found)
                : fmt::format("span not proven optimal within the time limit "
                              "({} of {} placements proven, bound {:g}); best "
                              "found: {} (by the ILP)",
                              exact->placementsProven, exact->placements,
                              exact->bound, exact->found);
      }
      return r;
    }
    if (problem.hasCapacity())
      return fail("the exact search does not plan recomputation under a "
                  "capacity; use kind=auto");
    llvm::Expected<ExactOverPlacements> exact =
        exactOverPlacements(problem, request.memoryLimit, request.timeLimit);
    if (!exact)
      return exact.takeError();
    llvm::Expected<KindResult> r = searched(problem, exact->schedule);
    if (r) {
      r->memoryAwareBound = exact->memoryAwareBound;
      r->choice =
          exact->optimal
              ? fmt::format("optimal over auto's {} placements ({}; {} nodes)",
                            exact->placements, exact->found, exact->nodes)
              : fmt::format("not proven optimal within the time limit ({} of "
                            "{} placements proven); best found: {}; {} nodes",
                            exact->placementsProven, exact->placements,
                            exact->found, exact->nodes);
    }
    return r;
  }
  if (request.kind == "ilp") {
    if (request.chunks > 1)
      return fail("chunks applies to interleaved-1f1b only; the ILP solves "
                  "on auto's placement");
    if (request.recompute && *request.recompute != RecomputePolicy::None)
      return fail("the ILP does not plan recomputation; use kind=auto with "
                  "recompute=");
    llvm::Expected<IlpOverAuto> ilp = ilpOverAuto(
        problem, request.memoryLimit, request.timeLimit, request.objective);
    if (!ilp)
      return ilp.takeError();
    llvm::Expected<KindResult> r = searched(problem, ilp->schedule);
    if (!r)
      return r;
    r->memoryAwareBound = ilp->memoryAwareBound;
    const std::string what =
        request.objective == Objective::Span ? "span" : "makespan";
    const std::string from = ilp->improved
                                 ? fmt::format("improved on auto's {} ({:g})",
                                               ilp->autoName, ilp->autoValue)
                                 : fmt::format("auto's {} kept", ilp->autoName);
    if (!ilp->solved) {
      r->choice = fmt::format(
          "ilp: the program has {} order variables, more than the {} it "
          "solves; auto's {} kept ({} {:g}, bound {:g}{})",
          ilp->orderVariables, kIlpMaxOrderVariables, ilp->autoName, what,
          ilp->value, ilp->bound, ilp->optimal ? ", optimal" : "");
      return r;
    }
    r->choice =
        ilp->optimal
            ? fmt::format("ilp: {} {:g} optimal on auto's placement ({}; {} "
                          "order variables)",
                          what, ilp->value, from, ilp->orderVariables)
            : fmt::format("ilp: {} {:g}, solver bound {:g} on auto's "
                          "placement, not proven within the time limit ({}; "
                          "{} order variables)",
                          what, ilp->value, ilp->bound, from,
                          ilp->orderVariables);
    return r;
  }
  if (request.kind == "auto") {
    if (request.chunks > 1)
      return fail("chunks applies to interleaved-1f1b only; auto chooses "
                  "the placement");
    RecomputePolicy policy =
        request.recompute.value_or(defaultRecomputePolicy(problem));
    AutoOptions options;
    options.memoryLimit = request.memoryLimit;
    options.timeLimit = request.timeLimit;
    options.objective = request.objective;
    if (request.progress)
      options.progress = request.progress;
    options.starts = request.starts;
    struct Candidate {
      std::string name;
      Schedule schedule;
    };
    std::vector<Candidate> candidates;
    // Stages that declare their attention are HelixPipe's cut: the layer
    // kinds cannot run them, so auto chooses helix (with its
    // recomputation planned like every kind's).
    bool attention = false;
    for (const Stage &st : problem.stages)
      attention |= st.attention.has_value();
    bool joint = problem.hasCapacity() && request.memoryLimit <= 0.0;
    if (attention) {
      llvm::Expected<Schedule> s =
          fixedKind(problem, ScheduleKind::Helix, request, policy);
      if (!s)
        return s.takeError();
      candidates.push_back({"helix", std::move(*s)});
      joint = false;
    } else {
      // With a capacity, the search shares its time with a second run at
      // the activation memory the capacity leaves.
      if (joint)
        options.timeLimit = request.timeLimit / 2;
      // The span search starts from the makespan search's result (half the
      // time each), so that its span is never above that schedule's.
      if (options.objective == Objective::Span) {
        AutoOptions first = options;
        first.objective = Objective::Makespan;
        first.timeLimit = options.timeLimit / 2;
        first.progress = nullptr;
        options.timeLimit -= first.timeLimit;
        if (llvm::Expected<AutoResult> seed = autoSchedule(problem, first))
          options.starts.push_back(std::move(seed->schedule));
        else
          llvm::consumeError(seed.takeError());
      }
      llvm::Expected<AutoResult> found = autoSchedule(problem, options);
      if (!found)
        return found.takeError();
      result.lowerBound = found->lowerBound;
      result.memoryAwareBound = found->memoryAwareBound;
      result.spanBound = found->spanBound;
      candidates.push_back({found->name, std::move(found->schedule)});
    }
    if (!attention)
      if (llvm::Error e = addPolicyCandidates(problem, request, candidates))
        return std::move(e);
    if (joint) {
      // The activation memory the capacities leave beside the params of
      // the contiguous placement (the least any rank has left there).
      double room = std::numeric_limits<double>::infinity();
      std::vector<double> held(problem.ranks, 0.0);
      if (llvm::Expected<std::vector<int>> placement =
              placeContiguous(problem, /*requireContiguous=*/false))
        held = staticMemory(problem, *placement, problem.ranks);
      else
        llvm::consumeError(placement.takeError());
      for (int r = 0; r < problem.ranks; ++r)
        room = std::min(room, problem.capacityOf(r) - held[r]);
      AutoOptions roomy = options;
      roomy.memoryLimit = std::isfinite(room) ? room : 0.0;
      roomy.progress = nullptr;
      if (roomy.memoryLimit > 0.0) {
        if (llvm::Expected<AutoResult> more = autoSchedule(problem, roomy))
          candidates.push_back({more->name, std::move(more->schedule)});
        else
          llvm::consumeError(more.takeError());
      }
      for (ScheduleKind kind : allScheduleKinds()) {
        llvm::Expected<Schedule> s = fixedKind(problem, kind, request, policy);
        if (s)
          candidates.push_back({scheduleKindName(kind).str(), std::move(*s)});
        else
          llvm::consumeError(s.takeError());
      }
    }
    std::optional<llvm::Error> firstError;
    bool have = false;
    for (Candidate &c : candidates) {
      llvm::Expected<RecomputeOutcome> planned =
          planRecomputation(problem, c.schedule, policy);
      if (!planned) {
        if (!firstError)
          firstError = planned.takeError();
        else
          llvm::consumeError(planned.takeError());
        continue;
      }
      if (have && planned->timeline.value(request.objective) >=
                      result.timeline.value(request.objective) - 1e-12)
        continue;
      have = true;
      result.schedule = std::move(c.schedule);
      result.timeline = std::move(planned->timeline);
      result.recompute = planned->chosen;
      result.choice = c.name;
    }
    if (!have)
      return std::move(*firstError);
    if (firstError)
      llvm::consumeError(std::move(*firstError));
    if (problem.hasCapacity() || result.schedule.recompute.any())
      result.choice += " + recompute " + result.recompute;
    return result;
  }
  if (request.kind == "policy-search")
    return searchOnePolicy(problem, request);
  llvm::Expected<ScheduleKind> parsed = parseScheduleKind(request.kind);
  if (!parsed)
    return parsed.takeError();
  RecomputePolicy policy = request.recompute.value_or(
      defaultRecomputePolicy(problem, *parsed == ScheduleKind::Helix
                                          ? std::optional(RecomputePolicy::Full)
                                          : std::nullopt));
  llvm::Expected<Schedule> schedule =
      fixedKind(problem, *parsed, request, policy);
  if (!schedule)
    return schedule.takeError();
  llvm::Expected<RecomputeOutcome> planned =
      planRecomputation(problem, *schedule, policy);
  if (!planned)
    return planned.takeError();
  if (request.memoryLimit > 0.0) {
    const Timeline &t = planned->timeline;
    for (int r = 0; r < problem.ranks; ++r)
      if (t.peakMemory[r] > request.memoryLimit * (1 + 1e-9))
        return fail(fmt::format("its peak memory {} on rank {} exceeds "
                                "memory-limit={}",
                                t.peakMemory[r], r, request.memoryLimit));
  }
  result.schedule = std::move(*schedule);
  result.timeline = std::move(planned->timeline);
  result.recompute = planned->chosen;
  return result;
}
