//===- PolicyBench.cpp - Policies: instantiation speed and auto's gain ----===//
//
// Three tables:
//  1. speed: each library policy instantiated (with its verification)
//     against the built-in kind it equals, or is nearest to (zbv: zb-v,
//     interleaved-zb: interleaved-1f1b), generate + verify, best of 3, up
//     to 64 ranks x 1024 microbatches x 2 chunks; goal: at most 2x;
//  2. the family verifier on 1,000 points (ranks 2..11 x microbatches
//     1..50 x chunks 1..2, those outside `requires` skipped) per library
//     policy; goal: 500 points under 10 s;
//  3. the quality grid (the quality benchmark's profiles, one and two
//     stages per rank, m in {p, 2p, 4p}): auto without the policies, auto
//     with them, and each library policy at its best setting within 1F1B's
//     peak memory, as makespan / lower bound; goal: auto with <= both.
//   stagecraft-policy-bench [max-ranks for table 3, default 8]
//
//===----------------------------------------------------------------------===//

#include "bench/HalfStageModel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Library.h"
#include "scheduler/policy/PolicySearch.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::bench;

namespace {

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

int speedTable() {
  struct Row {
    const char *policy;
    ScheduleKind kind;
    int chunks;
  };
  const Row rows[] = {{"gpipe", ScheduleKind::GPipe, 1},
                      {"1f1b", ScheduleKind::OneFOneB, 1},
                      {"1f1b-rules", ScheduleKind::OneFOneB, 1},
                      {"interleaved-1f1b", ScheduleKind::Interleaved1F1B, 2},
                      {"looped-bfs", ScheduleKind::Interleaved1F1B, 2},
                      {"interleaved-zb", ScheduleKind::Interleaved1F1B, 2},
                      {"zb-h1-rules", ScheduleKind::ZBH1, 1},
                      {"zb-h1-phases", ScheduleKind::ZBH1, 1},
                      {"zbv", ScheduleKind::ZBV, 2}};
  fmt::print("| policy | kind | ranks | microbatches | chunks | policy ms | "
             "kind ms | policy / kind | policy makespan | kind makespan "
             "|\n|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (auto [p, m] : {std::pair{8, 32}, {32, 256}, {64, 1024}})
    for (const Row &row : rows) {
      const Policy *policy = libraryPolicy(row.policy);
      Problem problem = unitProblem(p, m, p * row.chunks);
      double policyMs = 1e300, kindMs = 1e300;
      double policySpan = 0, kindSpan = 0;
      for (int rep = 0; rep < 3; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        llvm::Expected<Schedule> s = instantiatePolicy(*policy, problem);
        policyMs = std::min(policyMs, msSince(t0));
        auto t1 = std::chrono::steady_clock::now();
        llvm::Expected<Schedule> k = generateSchedule(
            problem,
            {row.kind,
             row.kind == ScheduleKind::Interleaved1F1B ? row.chunks : 0});
        llvm::Error bad = k ? verifySchedule(problem, *k) : k.takeError();
        kindMs = std::min(kindMs, msSince(t1));
        if (!s || bad) {
          fmt::print(stderr, "error: {} / {}: {} {}\n", row.policy,
                     scheduleKindName(row.kind).str(),
                     s ? "" : llvm::toString(s.takeError()),
                     llvm::toString(std::move(bad)));
          ++failures;
          break;
        }
        policySpan = simulate(problem, *s)->makespan;
        kindSpan = simulate(problem, *k)->makespan;
      }
      fmt::print("| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:g} "
                 "| {:g} |\n",
                 row.policy, scheduleKindName(row.kind).str(), p, m, row.chunks,
                 policyMs, kindMs, policyMs / kindMs, policySpan, kindSpan);
    }
  return failures;
}

int familyTable() {
  fmt::print("\n| policy | family | points held | skipped | seconds |\n"
             "|---|---|---|---|---|\n");
  int failures = 0;
  for (const Policy &policy : libraryPolicies()) {
    PolicyFamily family;
    family.ranksLo = 2;
    family.ranksHi = 11;
    family.microbatchesLo = 1;
    family.microbatchesHi = 50;
    // One and two chunks a rank; the policy's `requires` skips what it
    // does not take.
    family.chunksLo = 1;
    family.chunksHi = 2;
    auto t0 = std::chrono::steady_clock::now();
    llvm::Expected<PolicyFamilyReport> report =
        verifyPolicyFamily(policy, family);
    double s = msSince(t0) / 1000;
    if (!report) {
      fmt::print(stderr, "error: {}\n", llvm::toString(report.takeError()));
      ++failures;
      continue;
    }
    fmt::print("| {} | ranks 2..11 x microbatches 1..50 x chunks 1..2 | {} | "
               "{} | {:.2f} |\n",
               policy.name, report->held, report->skipped, s);
  }
  return failures;
}

int qualityTable(int maxRanks) {
  std::string head = "\n| profile | stages / rank | p | m | auto without "
                     "policies | auto with | auto's choice |";
  for (const Policy &policy : libraryPolicies())
    head += fmt::format(" {} |", policy.name);
  fmt::print("{}\n|---|---|---|---|---|---|---|", head);
  for (size_t i = 0; i < libraryPolicies().size(); ++i)
    fmt::print("---|");
  fmt::print("\n");
  int rows = 0, worse = 0, gained = 0;
  for (const Profile &profile : zeroBubbleProfiles())
    for (int perRank : {1, 2})
      for (int p : {4, 8, 16}) {
        if (p > maxRanks)
          continue;
        for (int m : {p, 2 * p, 4 * p}) {
          Problem problem = halfStageProblem(profile, p, m, 0.5);
          if (perRank == 1) {
            // Merge the half stages in pairs: one stage a rank.
            Problem whole = problem;
            whole.stages.clear();
            for (int s = 0; s < p; ++s) {
              Stage st = problem.stages[2 * s];
              const Stage &b = problem.stages[2 * s + 1];
              st.forward += b.forward;
              st.backwardInput += b.backwardInput;
              st.backwardWeight += b.backwardWeight;
              st.activation += b.activation;
              st.weightGrad += b.weightGrad;
              whole.stages.push_back(st);
            }
            problem = whole;
          }
          const double bound = lowerBound(problem);
          const double limit = highest(*oneFOneBPeakMemory(problem));
          KindRequest with;
          with.kind = "auto";
          with.timeLimit = 2.0;
          KindRequest without = with;
          without.libraryPolicies = false;
          llvm::Expected<KindResult> a = scheduleByName(problem, with);
          llvm::Expected<KindResult> b = scheduleByName(problem, without);
          if (!a || !b) {
            fmt::print(stderr, "error: auto failed\n");
            return 1;
          }
          ++rows;
          double best = 1e300;
          std::string cells;
          for (const Policy &policy : libraryPolicies()) {
            llvm::Expected<PolicySearchResult> r =
                searchPolicy(policy, problem, {}, limit);
            if (!r) {
              llvm::consumeError(r.takeError());
              cells += " - |";
              continue;
            }
            best = std::min(best, r->timeline.makespan);
            cells += fmt::format(" {:.4f} |", r->timeline.makespan / bound);
          }
          const double withSpan = a->timeline.makespan;
          worse += withSpan > std::min(b->timeline.makespan, best) + 1e-9;
          gained += withSpan < b->timeline.makespan - 1e-9;
          fmt::print("| {} | {} | {} | {} | {:.4f} | {:.4f} | {} |{}\n",
                     profile.name, perRank, p, m, b->timeline.makespan / bound,
                     withSpan / bound, a->choice, cells);
        }
      }
  fmt::print("\nauto with policies above auto without or above a policy's "
             "best setting: {} of {} rows; below auto without: {}\n",
             worse, rows, gained);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int maxRanks = argc > 1 ? std::atoi(argv[1]) : 8;
  int failures = speedTable();
  failures += familyTable();
  failures += qualityTable(maxRanks);
  return failures ? 1 : 0;
}
