//===- PolicySearch.cpp - A policy's parameters set by search -------------===//

#include "scheduler/policy/PolicySearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

using namespace stagecraft::pipe::sched;

namespace {
llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}
} // namespace

llvm::Expected<PolicySearchResult> stagecraft::pipe::sched::searchPolicy(
    const Policy &policy, const Problem &problem, const PolicyParams &fixed,
    double memoryLimit, Objective objective, int64_t maxPoints) {
  // The free parameters and their values, and the count of combinations.
  std::vector<const Policy::Param *> free;
  PolicyParams values;
  int64_t points = 1;
  for (const auto &[name, value] : fixed)
    if (!llvm::any_of(policy.params,
                      [&](const Policy::Param &q) { return q.name == name; }))
      return fail(
          fmt::format("policy {}: no parameter '{}'", policy.name, name));
  for (const Policy::Param &q : policy.params) {
    auto it = fixed.find(q.name);
    if (it != fixed.end()) {
      if (it->second < q.lo || it->second > q.hi)
        return fail(fmt::format("policy {}: parameter {}={} is outside "
                                "{}..{}",
                                policy.name, q.name, it->second, q.lo, q.hi));
      values[q.name] = it->second;
      continue;
    }
    free.push_back(&q);
    values[q.name] = q.lo;
    points *= q.hi - q.lo + 1;
    if (points > maxPoints)
      return fail(fmt::format("policy {}: its parameters have more than {} "
                              "combinations; hold some fixed",
                              policy.name, maxPoints));
  }
  std::optional<PolicySearchResult> best;
  std::optional<llvm::Error> firstError;
  double least = std::numeric_limits<double>::infinity();
  int tried = 0, fitting = 0;
  for (int64_t k = 0; k < points; ++k) {
    // Combination k, the last free parameter varying fastest.
    int64_t rest = k;
    for (size_t i = free.size(); i-- > 0;) {
      const int64_t span = free[i]->hi - free[i]->lo + 1;
      values[free[i]->name] = free[i]->lo + rest % span;
      rest /= span;
    }
    llvm::Expected<Schedule> schedule =
        instantiatePolicy(policy, problem, values);
    llvm::Expected<Timeline> timeline =
        schedule ? simulate(problem, *schedule)
                 : llvm::Expected<Timeline>(schedule.takeError());
    if (!timeline) {
      if (!firstError)
        firstError = timeline.takeError();
      else
        llvm::consumeError(timeline.takeError());
      continue;
    }
    ++tried;
    const double peak = *std::max_element(timeline->peakMemory.begin(),
                                          timeline->peakMemory.end());
    least = std::min(least, peak);
    if (memoryLimit > 0.0 && peak > memoryLimit * (1 + 1e-9))
      continue;
    ++fitting;
    if (best &&
        timeline->value(objective) >= best->timeline.value(objective) - 1e-12)
      continue;
    best = PolicySearchResult{std::move(*schedule), std::move(*timeline),
                              values, 0, 0};
  }
  if (!best) {
    if (tried == 0) {
      if (firstError)
        return std::move(*firstError);
      return fail(fmt::format("policy {}: nothing to try", policy.name));
    }
    if (firstError)
      llvm::consumeError(std::move(*firstError));
    return fail(fmt::format("policy {}: no parameter values fit memory {}; "
                            "the least any needed is {}",
                            policy.name, memoryLimit, least));
  }
  if (firstError)
    llvm::consumeError(std::move(*firstError));
  best->tried = tried;
  best->fitting = fitting;
  return std::move(*best);
}
