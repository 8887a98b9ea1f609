//===- PolicySearchTest.cpp - Policies searched and tried by auto ---------===//
//
// The search over a policy's parameters keeps the best setting within the
// memory limit (never worse than any one setting that fits); the library
// compiled in holds every file of examples/policies; auto with the policies
// as candidates is never worse than the best setting of any library policy
// within its limit; kind=policy-search names
// the setting it chose.
//
//===----------------------------------------------------------------------===//

#include "scheduler/policy/PolicySearch.h"
#include "scheduler/policy/Library.h"
#include "scheduler/search/ScheduleByName.h"

#include "TestUtil.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

double highestPeak(const Timeline &t) {
  return *std::max_element(t.peakMemory.begin(), t.peakMemory.end());
}

double oneFOneBLimit(const Problem &problem) {
  std::vector<double> peaks = llvm::cantFail(oneFOneBPeakMemory(problem));
  return *std::max_element(peaks.begin(), peaks.end());
}

/// Problems of the quality grid's two profiles: uniform and heavy ends.
std::vector<std::pair<std::string, Problem>> grid() {
  std::vector<std::pair<std::string, Problem>> out;
  for (int p : {2, 3, 4})
    for (int m : {p, 2 * p, 4 * p}) {
      Problem u = uniformProblem(p, m, p, {1.0, 1.0, 1.0}, 0.05);
      for (Stage &s : u.stages)
        s.weightGrad = 0.5;
      out.push_back({fmt::format("uniform p={} m={}", p, m), u});
      out.push_back(
          {fmt::format("heavy-ends p={} m={}", p, m), heavyEndsProblem(p, m)});
    }
  return out;
}

} // namespace

TEST(PolicyLibrary, HoldsEveryPolicyFileByName) {
  const std::vector<Policy> &library = libraryPolicies();
  std::vector<std::string> names;
  for (const Policy &p : library)
    names.push_back(p.name);
  for (const char *name : {"1f1b", "1f1b-rules", "gpipe", "interleaved-1f1b",
                           "looped-bfs", "zb-h1-rules"}) {
    EXPECT_TRUE(llvm::is_contained(names, name)) << name;
    ASSERT_NE(libraryPolicy(name), nullptr) << name;
    EXPECT_EQ(libraryPolicy(name)->name, name);
  }
  EXPECT_EQ(libraryPolicy("no-such-policy"), nullptr);
}

TEST(PolicySearch, BestSettingWithinTheLimitOverAGrid) {
  const Policy *zb = libraryPolicy("zb-h1-rules");
  ASSERT_NE(zb, nullptr);
  for (auto &[where, problem] : grid()) {
    if (problem.numStages() != problem.ranks)
      continue;
    const double limit = oneFOneBLimit(problem);
    llvm::Expected<PolicySearchResult> found =
        searchPolicy(*zb, problem, {}, limit);
    ASSERT_TRUE(!!found) << where << ": " << llvm::toString(found.takeError());
    EXPECT_LE(highestPeak(found->timeline), limit * (1 + 1e-9)) << where;
    EXPECT_EQ(found->tried, 5) << where;
    EXPECT_GE(found->fitting, 1) << where;
    EXPECT_TRUE(found->params.count("offset")) << where;
    // Never worse than any setting that fits, and equal to the one chosen.
    for (int64_t offset = 0; offset <= 4; ++offset) {
      Schedule s =
          llvm::cantFail(instantiatePolicy(*zb, problem, {{"offset", offset}}));
      Timeline t = llvm::cantFail(simulate(problem, s));
      if (highestPeak(t) <= limit * (1 + 1e-9)) {
        EXPECT_LE(found->timeline.makespan, t.makespan + 1e-9)
            << where << " offset=" << offset;
      }
      if (offset == found->params.at("offset")) {
        EXPECT_NEAR(found->timeline.makespan, t.makespan, 1e-9) << where;
      }
    }
  }
}

TEST(PolicySearch, FixedValuesHoldAndBadRequestsFail) {
  const Policy *zb = libraryPolicy("zb-h1-rules");
  ASSERT_NE(zb, nullptr);
  Problem problem = uniformProblem(4, 8, 4);
  llvm::Expected<PolicySearchResult> fixed =
      searchPolicy(*zb, problem, {{"offset", 3}});
  ASSERT_TRUE(!!fixed) << llvm::toString(fixed.takeError());
  EXPECT_EQ(fixed->tried, 1);
  EXPECT_EQ(fixed->params.at("offset"), 3);
  auto error = [](auto v) {
    return v ? std::string("no error") : llvm::toString(v.takeError());
  };
  EXPECT_EQ(error(searchPolicy(*zb, problem, {{"depth", 1}})),
            "policy zb-h1-rules: no parameter 'depth'");
  EXPECT_EQ(error(searchPolicy(*zb, problem, {{"offset", 9}})),
            "policy zb-h1-rules: parameter offset=9 is outside 0..4");
  EXPECT_EQ(error(searchPolicy(*zb, problem, {}, 0.0, Objective::Makespan, 3)),
            "policy zb-h1-rules: its parameters have more than 3 "
            "combinations; hold some fixed");
  // A limit below one activation per rank: nothing fits, and the message
  // says what the least needed was.
  EXPECT_NE(error(searchPolicy(*zb, problem, {}, 0.5))
                .find("no parameter values fit memory 0.5; the least any "
                      "needed is 4"),
            std::string::npos);
  // Outside the policy's requires: the instantiation's reason.
  Problem twoPerRank = uniformProblem(2, 4, 4);
  EXPECT_NE(error(searchPolicy(*zb, twoPerRank)).find("requires"),
            std::string::npos);
}

// auto's own search is time-limited, so two runs of it may differ (by
// 1e-4 of the makespan on the quality grid, bench/results/policy.md): the
// policies are checked against the run they are candidates of.
TEST(PolicySearch, AutoWithPoliciesNeverWorseThanAnyPolicysBestSetting) {
  for (auto &[where, problem] : grid()) {
    KindRequest with;
    with.kind = "auto";
    with.timeLimit = 0.2;
    llvm::Expected<KindResult> a = scheduleByName(problem, with);
    ASSERT_TRUE(!!a) << where;
    const double limit = oneFOneBLimit(problem);
    EXPECT_LE(highestPeak(a->timeline), limit * (1 + 1e-9)) << where;
    for (const Policy &policy : libraryPolicies()) {
      llvm::Expected<PolicySearchResult> best =
          searchPolicy(policy, problem, {}, limit);
      if (!best) {
        llvm::consumeError(best.takeError());
        continue;
      }
      EXPECT_LE(a->timeline.makespan, best->timeline.makespan + 1e-9)
          << where << " " << policy.name;
    }
  }
}

TEST(PolicySearch, PolicySearchKindNamesItsSetting) {
  Problem problem = heavyEndsProblem(4, 8);
  problem.stages.resize(4);
  KindRequest request;
  request.kind = "policy-search";
  request.policies.push_back({*libraryPolicy("zb-h1-rules"), {}});
  llvm::Expected<KindResult> r = scheduleByName(problem, request);
  ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
  EXPECT_EQ(r->choice.rfind("policy zb-h1-rules offset=", 0), 0u) << r->choice;
  EXPECT_NE(r->choice.find("settings within memory"), std::string::npos);
  request.policies.clear();
  llvm::Expected<KindResult> none = scheduleByName(problem, request);
  ASSERT_FALSE(!!none);
  EXPECT_NE(llvm::toString(none.takeError()).find("searches one policy"),
            std::string::npos);
}
