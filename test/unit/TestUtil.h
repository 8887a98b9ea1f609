//===- TestUtil.h - Helpers for scheduler unit tests ------------*- C++ -*-===//
//
// Problem builders and grids shared by the scheduler unit tests.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_TEST_UNIT_TESTUTIL_H
#define STAGECRAFT_TEST_UNIT_TESTUTIL_H

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Problem.h"
#include "scheduler/model/Simulator.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched::test {

/// How many times slower this build runs than the release build: a test
/// that gives a search a wall-clock limit and counts what it proves scales
/// the limit by it. The checked build (ASan + UBSan, scripts/sanitize.sh)
/// runs about 4 times slower.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kBuildSlowdown = 4.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr double kBuildSlowdown = 4.0;
#else
inline constexpr double kBuildSlowdown = 1.0;
#endif
#else
inline constexpr double kBuildSlowdown = 1.0;
#endif

struct Costs {
  double forward, backwardInput, backwardWeight;
};

/// \p stages identical stages named s0, s1, ...
inline Problem uniformProblem(int ranks, int microbatches, int stages,
                              Costs costs = {1.0, 1.0, 1.0},
                              double latency = 0.0) {
  Problem problem;
  problem.name = "p";
  problem.ranks = ranks;
  problem.microbatches = microbatches;
  problem.latency = latency;
  for (int s = 0; s < stages; ++s) {
    Stage stage;
    stage.name = "s" + std::to_string(s);
    stage.forward = costs.forward;
    stage.backwardInput = costs.backwardInput;
    stage.backwardWeight = costs.backwardWeight;
    problem.stages.push_back(stage);
  }
  return problem;
}

/// The quality benchmark's "hetero" profile: 2p half stages with the Zero
/// Bubble paper's costs and latency, activation 0.5 and weight_grad 0.25,
/// the first stage x1.3 and the last x1.6 (embedding, LM head).
inline Problem heavyEndsProblem(int p, int m) {
  Problem problem =
      uniformProblem(p, m, 2 * p, {0.5, 0.48825, 0.25205}, 0.0324);
  for (int s = 0; s < 2 * p; ++s) {
    double scale = s == 0 ? 1.3 : s == 2 * p - 1 ? 1.6 : 1.0;
    Stage &st = problem.stages[s];
    st.forward *= scale;
    st.backwardInput *= scale;
    st.backwardWeight *= scale;
    st.activation = 0.5;
    st.weightGrad = 0.25;
  }
  return problem;
}

/// Ranks 1..8 and 16, as the closed-form grids use.
inline std::vector<int> rankGrid() { return {1, 2, 3, 4, 5, 6, 7, 8, 16}; }

/// Cost triples: the uniform F = I = W case and two lopsided ones.
inline std::vector<Costs> costGrid() {
  return {{1.0, 1.0, 1.0}, {1.0, 2.0, 0.5}, {2.0, 1.0, 1.5}};
}

/// Generates and simulates; a failure of either is a test failure.
inline Timeline generateAndSimulate(const Problem &problem,
                                    const ScheduleOptions &options) {
  llvm::Expected<Schedule> schedule = generateSchedule(problem, options);
  if (!schedule) {
    ADD_FAILURE() << llvm::toString(schedule.takeError());
    return {};
  }
  llvm::Expected<Timeline> timeline = simulate(problem, *schedule);
  if (!timeline) {
    ADD_FAILURE() << llvm::toString(timeline.takeError());
    return {};
  }
  return *timeline;
}

inline double highest(const std::vector<double> &values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

/// The message of \p err, consuming it; "" for success.
inline std::string errorMessage(llvm::Error err) {
  if (!err)
    return "";
  return llvm::toString(std::move(err));
}

} // namespace stagecraft::pipe::sched::test

#endif // STAGECRAFT_TEST_UNIT_TESTUTIL_H
