//===- PolicyTest.cpp - Schedule families users write ---------------------===//
//
// Policies over grids of ranks x microbatches: written as phases they equal
// the built-in kinds action for action (gpipe, 1f1b, interleaved-1f1b on
// the microbatch counts its kind takes); written as priority rules, 1F1B
// on uniform costs; every instantiation verifies on random costs; and bad
// input is an error naming the line, the point or the rank, never a hang.
//
//===----------------------------------------------------------------------===//

#include "scheduler/policy/Policy.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/kinds/ListScheduler.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Library.h"

#include "TestUtil.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

Policy parsed(llvm::StringRef text) {
  llvm::Expected<Policy> p = parsePolicy(text);
  if (!p) {
    ADD_FAILURE() << llvm::toString(p.takeError());
    return Policy();
  }
  return std::move(*p);
}

std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : std::string("no error");
}

template <typename T> std::string errorOf(llvm::Expected<T> v) {
  return v ? std::string("no error") : llvm::toString(v.takeError());
}

const char *kOneFOneB =
    R"(policy 1f1b   # PipeDream-Flush, Narayanan et al. 2021
placement loop
warmup ranks - rank - 1
steady F B
requires chunks == 1
)";

const char *kGPipe = R"(policy gpipe  # Huang et al. 2019
warmup microbatches
steady F B
)";

// Megatron-LM's interleaved schedule: warm-up (p - r - 1) * 2 + (v - 1) * p
// forwards, then one forward and one backward.
const char *kInterleaved = R"(policy interleaved-1f1b
placement loop
warmup min((ranks - rank - 1) * 2 + (chunks - 1) * ranks, microbatches * chunks)
steady F B
requires microbatches % ranks == 0
)";

const char *kRules1F1B = R"(policy 1f1b-by-rules
rule B
rule F when in_flight < ranks - rank
requires chunks == 1
)";

void expectSameOrders(const Schedule &a, const Schedule &b,
                      const std::string &where) {
  ASSERT_EQ(a.placement, b.placement) << where;
  ASSERT_EQ(a.ranks.size(), b.ranks.size()) << where;
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    std::vector<std::string> x, y;
    for (const Action &act : a.ranks[r])
      x.push_back(shortName(act));
    for (const Action &act : b.ranks[r])
      y.push_back(shortName(act));
    EXPECT_EQ(x, y) << where << " rank " << r;
  }
}

// Two policies give \p problem the same schedule, rank by rank.
void expectSamePolicyOrders(const Policy &x, const Policy &y,
                            const Problem &problem, const std::string &where) {
  llvm::Expected<Schedule> a = instantiatePolicy(x, problem);
  llvm::Expected<Schedule> b = instantiatePolicy(y, problem);
  ASSERT_TRUE(bool(a)) << where << ": " << errorOf(a.takeError());
  ASSERT_TRUE(bool(b)) << where << ": " << errorOf(b.takeError());
  expectSameOrders(*a, *b, where);
}

// The X actions of \p s, each checked to pair a forward and a backward of
// one rank.
int overlappedOnOneRank(const Schedule &s, const std::string &where) {
  int overlapped = 0;
  for (const std::vector<Action> &order : s.ranks)
    for (const Action &a : order)
      if (a.kind == ActionKind::ForwardBackward) {
        ++overlapped;
        EXPECT_EQ(s.placement[a.stage], s.placement[a.backwardStage]) << where;
        EXPECT_GE(a.backwardMicrobatch, 0) << where;
      }
  return overlapped;
}

} // namespace

// gpipe and 1f1b as phases equal the kinds on p 2..8, m p..4p.
TEST(Policy, PhasesEqualGPipeAnd1F1BOverAGrid) {
  for (auto [text, kind] : {std::pair{kGPipe, ScheduleKind::GPipe},
                            std::pair{kOneFOneB, ScheduleKind::OneFOneB}}) {
    Policy policy = parsed(text);
    for (int p = 2; p <= 8; ++p)
      for (int m = p; m <= 4 * p; ++m) {
        Problem problem = uniformProblem(p, m, p);
        llvm::Expected<Schedule> ours = instantiatePolicy(policy, problem);
        ASSERT_TRUE(bool(ours)) << errorOf(ours.takeError());
        llvm::Expected<Schedule> theirs = generateSchedule(problem, {kind, 0});
        ASSERT_TRUE(bool(theirs)) << errorOf(theirs.takeError());
        expectSameOrders(*ours, *theirs,
                         fmt::format("{} p={} m={}", policy.name, p, m));
      }
  }
}

// Interleaved 1F1B as phases (Megatron's warm-up formula) equals the kind
// for 2 and 3 chunks where m is a multiple of p, the counts the kind
// schedules as Megatron does.
TEST(Policy, PhasesEqualInterleaved1F1BOverAGrid) {
  Policy policy = parsed(kInterleaved);
  for (int p = 2; p <= 8; ++p)
    for (int v = 2; v <= 3; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        Problem problem = uniformProblem(p, m, v * p);
        llvm::Expected<Schedule> ours = instantiatePolicy(policy, problem);
        ASSERT_TRUE(bool(ours)) << errorOf(ours.takeError());
        llvm::Expected<Schedule> theirs =
            generateSchedule(problem, {ScheduleKind::Interleaved1F1B, v});
        ASSERT_TRUE(bool(theirs)) << errorOf(theirs.takeError());
        expectSameOrders(*ours, *theirs,
                         fmt::format("interleaved p={} v={} m={}", p, v, m));
      }
}

// Priority rules express 1F1B too: on uniform costs they give its order.
TEST(Policy, RulesGive1F1BOnUniformCosts) {
  Policy policy = parsed(kRules1F1B);
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; ++m) {
      Problem problem = uniformProblem(p, m, p);
      llvm::Expected<Schedule> ours = instantiatePolicy(policy, problem);
      ASSERT_TRUE(bool(ours)) << errorOf(ours.takeError());
      llvm::Expected<Schedule> theirs =
          generateSchedule(problem, {ScheduleKind::OneFOneB, 0});
      ASSERT_TRUE(bool(theirs)) << errorOf(theirs.takeError());
      expectSameOrders(*ours, *theirs, fmt::format("rules p={} m={}", p, m));
    }
}

// Every policy instantiates to a verified schedule on random costs and
// latencies, one to three stages a rank, in loop and V placement; the
// rules' cap bounds every rank's in-flight activations.
TEST(Policy, EveryInstantiationVerifiesOnRandomCosts) {
  const char *zbLike = R"(policy zb-like
placement v
rule I
rule F when in_flight < 2 * ranks - rank
rule W
cap 2 * ranks
)";
  // Phases beside a rule: 1F1B's F and I order, W filling its waits.
  const char *zbPhases = R"(policy zb-phases
warmup ranks - rank - 1
steady F I
rule W
cap ranks * chunks
)";
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.3, 2.0);
  for (const char *text :
       {kOneFOneB, kGPipe, kInterleaved, kRules1F1B, zbLike, zbPhases})
    for (int p = 2; p <= 6; ++p)
      for (int m : {1, p, 2 * p + 1})
        for (int v : {1, 2, 3}) {
          Policy policy = parsed(text);
          if (policy.placement == Policy::Placement::V && v != 2)
            continue;
          Problem problem = uniformProblem(p, m, v * p, {1, 1, 1}, u(rng) / 4);
          for (Stage &st : problem.stages) {
            st.forward = u(rng);
            st.backwardInput = u(rng);
            st.backwardWeight = u(rng);
          }
          llvm::Expected<bool> applies = policyApplies(policy, problem, {});
          ASSERT_TRUE(bool(applies));
          if (!*applies)
            continue;
          llvm::Expected<Schedule> s = instantiatePolicy(policy, problem);
          ASSERT_TRUE(bool(s)) << policy.name << " p=" << p << " m=" << m
                               << " v=" << v << ": " << errorOf(s.takeError());
          EXPECT_FALSE(bool(verifySchedule(problem, *s)));
        }
}

// Expressions: precedence, floor division as Python's, short-circuit, and
// errors naming the column.
TEST(Policy, ExpressionsEvaluateAndFailByColumn) {
  std::vector<std::string> names = {"a", "b"};
  auto value = [&](llvm::StringRef text, int64_t a, int64_t b) -> int64_t {
    llvm::Expected<PolicyExpr> e = parsePolicyExpr(text, names);
    EXPECT_TRUE(bool(e)) << text.str();
    if (!e) {
      llvm::consumeError(e.takeError());
      return -999;
    }
    llvm::Expected<int64_t> v = evaluatePolicyExpr(
        *e, [&](llvm::StringRef n) -> std::optional<int64_t> {
          return n == "a" ? a : b;
        });
    EXPECT_TRUE(bool(v)) << text.str();
    return v ? *v : (llvm::consumeError(v.takeError()), -999);
  };
  EXPECT_EQ(value("a + b * 2", 1, 3), 7);
  EXPECT_EQ(value("(a + b) * 2", 1, 3), 8);
  EXPECT_EQ(value("-7 // 2", 0, 0), -4);
  EXPECT_EQ(value("-7 mod 2", 0, 0), 1);
  EXPECT_EQ(value("min(a, b, 2) + max(a, b)", 5, 3), 7);
  EXPECT_EQ(value("select(a > b, a, b)", 2, 9), 9);
  EXPECT_EQ(value("b != 0 and a // b > 1", 4, 0), 0);
  EXPECT_EQ(value("not a < b or a == b", 1, 1), 1);
  auto parseError = [&](llvm::StringRef text) {
    return errorOf(parsePolicyExpr(text, names));
  };
  EXPECT_EQ(parseError("a + c"), "column 5: unknown name 'c'; known: a, b");
  EXPECT_EQ(parseError("a +"),
            "column 4: expected a number, a name or '(' but the text ended");
  EXPECT_EQ(parseError("min(a)"), "column 1: min takes 2 arguments or more");
  EXPECT_EQ(parseError("(a"), "column 3: expected ')'");
  llvm::Expected<PolicyExpr> div = parsePolicyExpr("a // (b - b)", names);
  ASSERT_TRUE(bool(div));
  EXPECT_EQ(
      errorOf(evaluatePolicyExpr(
          *div, [](llvm::StringRef) { return std::optional<int64_t>(1); })),
      "column 3: division by zero in (a // (b - b))");
}

// Bad policies: each a located error, and instantiation errors name the
// point, the rank and what blocks it; none loops forever.
TEST(Policy, BadInputIsALocatedError) {
  EXPECT_EQ(errorOf(parsePolicy("placement loop\n")),
            "line 1: a policy starts with 'policy NAME'");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup rank +\nsteady F B\n")),
            "line 2, column 14: expected a number, a name or '(' but the "
            "text ended");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 1\nsteady F Q\n")),
            "line 3: 'Q' is not an action (F, B, I, W or X)");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nrule F when stagee > 1\nrule B\n")),
            "line 2, column 13: unknown name 'stagee'; known: rank, ranks, "
            "microbatches, chunks, stages, stage, microbatch, "
            "forwards_issued, backwards_done, in_flight");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nparam k 4..1\nrule F\nrule B\n")),
            "line 2: parameter 'k' has an empty range 4..1");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nsteady F B\n")),
            "policy x: phases need both 'warmup' and 'steady'");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nfrobnicate 1\n")),
            "line 2: unknown statement 'frobnicate' (policy, placement, "
            "group, forwards, backwards, warmup, steady, defer, rule, param, "
            "cap, requires)");

  Problem problem = uniformProblem(2, 4, 2);
  // A rule that never fires for F: nothing can start.
  Policy never = parsed("policy never\nrule B\nrule F when in_flight < 0\n");
  EXPECT_EQ(errorOf(instantiatePolicy(never, problem)),
            "policy never at ranks=2 microbatches=4 stages=2: no rank can "
            "start an action while 16 remain: rank 0: 0F0 is ready but no "
            "rule for it holds (in_flight 0); 0B0 waits for 0F0 | rank 1: "
            "1F0 waits for 0F0; 1B0 waits for 1F0");
  Policy zero = parsed("policy zero\nwarmup ranks // (rank - rank)\nsteady "
                       "F B\n");
  EXPECT_EQ(errorOf(instantiatePolicy(zero, problem)),
            "policy zero at ranks=2 microbatches=4 stages=2: warmup (line "
            "2): column 7: division by zero in (ranks // (rank - rank))");
  Policy capped = parsed("policy capped\nrule B\nrule F\ncap rank - 1\n");
  EXPECT_EQ(errorOf(instantiatePolicy(capped, problem)),
            "policy capped at ranks=2 microbatches=4 stages=2: cap is -1 on "
            "rank 0: below one activation, no forward could start");
  Policy needs = parsed("policy needs\nrequires microbatches % ranks == 0\n"
                        "requires microbatches >= 8\nwarmup 0\nsteady F B\n");
  EXPECT_EQ(errorOf(instantiatePolicy(needs, problem)),
            "policy needs at ranks=2 microbatches=4 stages=2: outside the "
            "policy's requires: (microbatches >= 8) (line 3)");
  Policy param = parsed("policy p\nparam k 0..4 = 1\nwarmup k\nsteady F B\n");
  EXPECT_EQ(errorOf(instantiatePolicy(param, problem, {{"k", 5}})),
            "policy p at ranks=2 microbatches=4 stages=2: parameter k=5 is "
            "outside 0..4");
  EXPECT_EQ(errorOf(instantiatePolicy(param, problem, {{"j", 1}})),
            "policy p at ranks=2 microbatches=4 stages=2: no parameter 'j'");
  EXPECT_TRUE(bool(instantiatePolicy(param, problem, {{"k", 4}})));
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 1\nsteady F I\nrule F\n")),
            "line 4: 'rule F': the phases order F (warmup, steady 'F I'); "
            "beside phases, rules order only the kinds the pattern leaves "
            "out");
  // Phases beside rules: a cap the static order cannot meet (a third
  // forward before any I) names the order's next action on each rank.
  Policy stuck = parsed("policy stuck\nwarmup 2\nsteady F I\nrule W\n"
                        "cap 2\n");
  EXPECT_EQ(errorOf(instantiatePolicy(stuck, problem)),
            "policy stuck at ranks=2 microbatches=4 stages=2: no rank can "
            "start an action while 20 remain: rank 0: 0F2 (next in its "
            "phases order) is ready but the cap holds it (in_flight 2, cap "
            "2) | rank 1: 1F2 (next in its phases order) waits for 0F2");
}

// A family: 1F1B holds on every point of ranks 2..16 x microbatches 1..64;
// points outside `requires` are skipped and counted; a policy that hangs
// somewhere is reported at its first failing point.
TEST(Policy, FamiliesVerifyOrNameTheirFirstFailingPoint) {
  PolicyFamily family;
  family.ranksLo = 2;
  family.ranksHi = 16;
  family.microbatchesLo = 1;
  family.microbatchesHi = 64;
  llvm::Expected<PolicyFamilyReport> held =
      verifyPolicyFamily(parsed(kOneFOneB), family);
  ASSERT_TRUE(bool(held)) << errorOf(held.takeError());
  EXPECT_EQ(held->held, 15 * 64);
  EXPECT_EQ(held->skipped, 0);

  Policy divisible =
      parsed(std::string(kOneFOneB) + "requires microbatches % ranks == 0\n");
  llvm::Expected<PolicyFamilyReport> some =
      verifyPolicyFamily(divisible, family);
  ASSERT_TRUE(bool(some)) << errorOf(some.takeError());
  int expected = 0;
  for (int p = 2; p <= 16; ++p)
    expected += 64 / p;
  EXPECT_EQ(some->held, expected);
  EXPECT_EQ(some->skipped, 15 * 64 - expected);

  // The last rank warms up with every forward, the others run a backward
  // right after each forward: from 2 microbatches on, rank 0's B0 waits
  // for the last rank's B0, which comes after a forward rank 0 sends only
  // after its B0.
  Policy hangs = parsed("policy hangs\nwarmup select(rank == ranks - 1, "
                        "microbatches, 0)\nsteady B F\n");
  std::string message = errorOf(verifyPolicyFamily(hangs, family));
  EXPECT_EQ(
      message.rfind("policy hangs at ranks=2 microbatches=2 stages=2: ", 0), 0u)
      << message;
}

// What a fuzzer would find: deep nesting and integer overflow are errors,
// not a stack overflow or undefined behaviour.
TEST(Policy, DeepNestingAndOverflowAreErrors) {
  std::string deep(1000, '(');
  EXPECT_NE(errorOf(parsePolicyExpr(deep + "1", {})).find("nested deeper"),
            std::string::npos);
  std::string minus(1000, '-');
  EXPECT_NE(errorOf(parsePolicyExpr(minus + "1", {})).find("nested deeper"),
            std::string::npos);
  llvm::Expected<PolicyExpr> big =
      parsePolicyExpr("999999999999999 * 999999999999999", {});
  ASSERT_TRUE(bool(big));
  EXPECT_EQ(errorOf(evaluatePolicyExpr(
                *big, [](llvm::StringRef) { return std::nullopt; })),
            "column 17: integer overflow in (999999999999999 * "
            "999999999999999)");
}

// Phases and rules together: the phases order F and I, `rule W` fills each
// wait of that order with a deferred W, and the cap bounds the activations
// a rank holds. That is the zero-bubble papers' handcrafted construction,
// the list scheduler's backbone (ListScheduler.h): where W holds the whole
// activation, `cap ranks` is its memory limit of ranks activations, and the
// two give the same orders on random costs and latencies.
TEST(Policy, PhasesWithRulesFillWaitsAsTheZeroBubbleBackbone) {
  const Policy *library = libraryPolicy("zb-h1-phases");
  ASSERT_NE(library, nullptr);
  const Policy &policy = *library;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.3, 2.0);
  int filled = 0;
  for (int p = 2; p <= 6; ++p)
    for (int m = 1; m <= 3 * p; ++m) {
      Problem problem = uniformProblem(p, m, p, {1, 1, 1}, u(rng) / 4);
      for (Stage &s : problem.stages) {
        s.forward = u(rng);
        s.backwardInput = u(rng);
        s.backwardWeight = u(rng);
        s.activation = 1.0;
        s.weightGrad = 1.0;
      }
      const std::string where = fmt::format("p={} m={}", p, m);
      llvm::Expected<Schedule> ours = instantiatePolicy(policy, problem);
      ASSERT_TRUE(bool(ours)) << where << ": " << errorOf(ours.takeError());
      std::vector<int> placement(p);
      for (int r = 0; r < p; ++r)
        placement[r] = r;
      ListPolicy list;
      list.memoryLimit.assign(p, p);
      list.backbone = oneFOneBOrders(
          problem, placement, [&](int k) { return p - k - 1; },
          ActionKind::BackwardInput);
      llvm::Expected<Schedule> theirs = listSchedule(problem, placement, list);
      ASSERT_TRUE(bool(theirs)) << where << ": " << errorOf(theirs.takeError());
      expectSameOrders(*ours, *theirs, where);
      // Some W ran before the rank's last I: the rule filled a wait.
      for (const std::vector<Action> &order : ours->ranks) {
        auto lastI = std::find_if(order.rbegin(), order.rend(), [](auto &a) {
          return a.kind == ActionKind::BackwardInput;
        });
        auto firstW = llvm::find_if(order, [](auto &a) {
          return a.kind == ActionKind::BackwardWeight;
        });
        filled += firstW < lastI.base() - 1;
      }
    }
  EXPECT_GT(filled, 0);

  // The library's zb-h1-phases is as fast as the zb-h1 kind on uniform
  // costs over p 2..8 x m p..4p.
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 4 * p; ++m) {
      Problem problem = uniformProblem(p, m, p);
      llvm::Expected<Schedule> ours = instantiatePolicy(*library, problem);
      ASSERT_TRUE(bool(ours)) << errorOf(ours.takeError());
      llvm::Expected<Schedule> theirs =
          generateSchedule(problem, {ScheduleKind::ZBH1, 0});
      ASSERT_TRUE(bool(theirs)) << errorOf(theirs.takeError());
      EXPECT_NEAR(simulate(problem, *ours)->makespan,
                  simulate(problem, *theirs)->makespan, 1e-9)
          << "p=" << p << " m=" << m;
    }
}

// F&B overlap as a pattern token: X runs the next forward overlapped with
// the next backward. Interleaved 1F1B with one more warm-up forward and
// `steady X` (the library's interleaved-1f1b-overlap) verifies over a grid
// of ranks, chunks and microbatches, pairs a forward and a backward in
// every X, and where F&B costs less than F + B is faster than the kind.
TEST(Policy, OverlapPairsTheSteadyStatesForwardAndBackward) {
  const Policy *policy = libraryPolicy("interleaved-1f1b-overlap");
  ASSERT_NE(policy, nullptr);
  for (int p = 2; p <= 6; ++p)
    for (int v = 1; v <= 3; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        const std::string where = fmt::format("p={} v={} m={}", p, v, m);
        Problem problem = uniformProblem(p, m, v * p, {1, 1, 1});
        for (Stage &s : problem.stages)
          s.forwardBackward = 2.2; // against F + B = 3
        llvm::Expected<Schedule> ours = instantiatePolicy(*policy, problem);
        ASSERT_TRUE(bool(ours)) << where << ": " << errorOf(ours.takeError());
        EXPECT_GT(overlappedOnOneRank(*ours, where), 0) << where;
        llvm::Expected<Schedule> kind = generateSchedule(
            problem, v == 1
                         ? ScheduleOptions{ScheduleKind::OneFOneB, 0}
                         : ScheduleOptions{ScheduleKind::Interleaved1F1B, v});
        ASSERT_TRUE(bool(kind)) << where << ": " << errorOf(kind.takeError());
        EXPECT_LT(simulate(problem, *ours)->makespan,
                  simulate(problem, *kind)->makespan)
            << where;
      }
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 1\nsteady F B\nrule X\n")),
            "line 4: 'rule X': X starts the next F and B, which the phases "
            "order; beside phases, rules order only the kinds the pattern "
            "leaves out");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 1\nsteady X I\nrule W\n")),
            "policy x: a pattern with 'X' (F&B overlap) orders every action "
            "itself; rules beside it are not supported");
  Policy both = parsed("policy both\nwarmup 1\nsteady X I\n");
  EXPECT_EQ(errorOf(instantiatePolicy(both, uniformProblem(2, 4, 2))),
            "policy both at ranks=2 microbatches=4 stages=2: the policy runs "
            "both B (or X, whose backward is a B) and I: write the backward "
            "fused (B) or split (I and W)");
}

namespace {
// torch's ScheduleZBVZeroBubble._calculate_single_rank_operations, written
// as torch writes it (counters through warm-up, steady state and drain,
// microbatches past m dropped), for rank r of p on m microbatches.
std::vector<Action> torchZbvOrder(int p, int m, int r) {
  const int nMicro = std::max(2 * p - 1, m), c0 = r, c1 = 2 * p - 1 - r;
  std::vector<Action> out;
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto add = [&](ActionKind k, int stage, int mb) {
    if (mb < m)
      out.push_back({k, stage, mb});
  };
  const ActionKind F = ActionKind::Forward, I = ActionKind::BackwardInput,
                   W = ActionKind::BackwardWeight;
  for (int k = 0; k < 2 * (p - r) - 1; ++k)
    add(F, c0, f0++);
  for (int k = 0; k < r; ++k) {
    add(F, c1, f1++);
    add(F, c0, f0++);
  }
  for (int k = 0; k < p - r; ++k) {
    add(F, c1, f1++);
    add(I, c1, b1);
    add(W, c1, b1++);
  }
  while (f1 < f0 || f0 < nMicro) {
    if (f0 < nMicro)
      add(F, c0, f0++);
    add(I, c0, b0);
    add(W, c0, b0++);
    add(F, c1, f1++);
    add(I, c1, b1);
    add(W, c1, b1++);
  }
  int w0 = b0, w1 = b1;
  for (int k = 0; k < r; ++k) {
    add(I, c0, b0++);
    add(I, c1, b1++);
  }
  for (int k = 0; k < p - r; ++k) {
    add(I, c0, b0++);
    add(W, c0, w0++);
  }
  while (w1 < b1)
    add(W, c1, w1++);
  while (w0 < b0)
    add(W, c0, w0++);
  return out;
}

std::vector<std::string> namesOf(const std::vector<Action> &order,
                                 ActionKind kind) {
  std::vector<std::string> out;
  for (const Action &a : order)
    if (a.kind == kind)
      out.push_back(shortName(a));
  return out;
}
} // namespace

// Order keys (`forwards by`, `backwards by`) give the phases any order of a
// rank's forwards and backwards: the library's zbv, on V placement, runs
// torch's ScheduleZBVZeroBubble forwards in torch's order and its input
// gradients in torch's order on every rank, each W right after its I, over
// p 2..8 x m 2p-1..4p. (How the two interleave at the end, and where torch
// defers the drain's W, a pattern does not express.)
TEST(Policy, OrderKeysGiveTorchsZbvForwardAndInputGradientOrders) {
  const Policy *zbv = libraryPolicy("zbv");
  ASSERT_NE(zbv, nullptr);
  for (int p = 2; p <= 8; ++p)
    for (int m = 2 * p - 1; m <= 4 * p; ++m) {
      Problem problem = uniformProblem(p, m, 2 * p);
      const std::string where = fmt::format("p={} m={}", p, m);
      llvm::Expected<Schedule> ours = instantiatePolicy(*zbv, problem);
      ASSERT_TRUE(bool(ours)) << where << ": " << errorOf(ours.takeError());
      for (int r = 0; r < p; ++r) {
        std::vector<Action> theirs = torchZbvOrder(p, m, r);
        const std::vector<Action> &order = ours->ranks[r];
        for (ActionKind k : {ActionKind::Forward, ActionKind::BackwardInput,
                             ActionKind::BackwardWeight})
          ASSERT_EQ(namesOf(order, k).size(), namesOf(theirs, k).size())
              << where << " rank " << r;
        EXPECT_EQ(namesOf(order, ActionKind::Forward),
                  namesOf(theirs, ActionKind::Forward))
            << where << " rank " << r;
        EXPECT_EQ(namesOf(order, ActionKind::BackwardInput),
                  namesOf(theirs, ActionKind::BackwardInput))
            << where << " rank " << r;
        for (size_t k = 0; k < order.size(); ++k)
          if (order[k].kind == ActionKind::BackwardInput) {
            ASSERT_LT(k + 1, order.size()) << where;
            EXPECT_EQ(order[k + 1].kind, ActionKind::BackwardWeight) << where;
            EXPECT_EQ(order[k + 1].microbatch, order[k].microbatch) << where;
          }
      }
      // The torch order itself is a valid schedule of the same placement.
      Schedule torchOrder;
      torchOrder.placement = ours->placement;
      for (int r = 0; r < p; ++r)
        torchOrder.ranks.push_back(torchZbvOrder(p, m, r));
      EXPECT_EQ(errorOf(verifySchedule(problem, torchOrder)), "no error")
          << where;
    }
}

TEST(Policy, OrderKeysAreCheckedWhereTheyAreWritten) {
  EXPECT_EQ(errorOf(parsePolicy("policy x\nforwards in-order\nwarmup 0\n"
                                "steady F B\n")),
            "line 2: expected 'forwards by EXPR'");
  EXPECT_NE(errorOf(parsePolicy("policy x\nforwards by in_flight\nwarmup 0\n"
                                "steady F B\n"))
                .find("line 2, column 13"),
            std::string::npos);
  // A key reads stage, microbatch and chunk; its errors name the point.
  Policy zero = parsed("policy zero\nbackwards by microbatch // chunk\n"
                       "warmup ranks - rank - 1\nsteady F B\n");
  EXPECT_NE(errorOf(instantiatePolicy(zero, uniformProblem(2, 4, 2)))
                .find("backwards (line 2): "),
            std::string::npos);
  // 1F1B's backwards last microbatch first by key: the same schedule as
  // `backwards reversed` with one group of all microbatches.
  Policy keyed = parsed("policy k\nforwards by microbatch\n"
                        "backwards by -microbatch\nwarmup microbatches\n"
                        "steady F B\n");
  Policy reversed = parsed("policy r\ngroup microbatches\nbackwards reversed\n"
                           "warmup microbatches\nsteady F B\n");
  expectSamePolicyOrders(keyed, reversed, uniformProblem(4, 8, 4), "reversed");
}

// `rule X` starts the rank's next forward overlapped with its next backward
// once both are ready (and the cap admits the forward). On V placement,
// with zbv's order keys, rules with X first pair forwards and backwards of
// the rank's two stages, verify on p 2..6 x m 2p..4p, and where F&B costs
// 2.2 against F + B = 3 end sooner than the same rules without X. A split
// backward (I) with X is refused.
TEST(Policy, RulesStartXWhenBothHalvesAreReady) {
  const Policy *zbv = libraryPolicy("zbv");
  ASSERT_NE(zbv, nullptr);
  auto vRules = [&](const char *text) {
    Policy policy = parsed(text);
    policy.placement = Policy::Placement::V;
    policy.forwardKey = zbv->forwardKey;
    policy.backwardKey = zbv->backwardKey;
    return policy;
  };
  Policy withX = vRules("policy x\nrule X\nrule B\n"
                        "rule F when in_flight < 2 * ranks\n");
  Policy without = vRules("policy b\nrule B\n"
                          "rule F when in_flight < 2 * ranks\n");
  for (int p = 2; p <= 6; ++p)
    for (int m = 2 * p; m <= 4 * p; m += p) {
      const std::string where = fmt::format("p={} m={}", p, m);
      Problem problem = uniformProblem(p, m, 2 * p, {1, 1, 1});
      for (Stage &s : problem.stages)
        s.forwardBackward = 2.2;
      llvm::Expected<Schedule> ours = instantiatePolicy(withX, problem);
      ASSERT_TRUE(bool(ours)) << where << ": " << errorOf(ours.takeError());
      llvm::Expected<Schedule> plain = instantiatePolicy(without, problem);
      ASSERT_TRUE(bool(plain)) << where << ": " << errorOf(plain.takeError());
      EXPECT_GT(overlappedOnOneRank(*ours, where), 0) << where;
      EXPECT_LT(simulate(problem, *ours)->makespan,
                simulate(problem, *plain)->makespan)
          << where;
    }
  Policy split = parsed("policy s\nrule X\nrule I\nrule W\nrule F\n");
  EXPECT_NE(errorOf(instantiatePolicy(split, uniformProblem(2, 4, 2)))
                .find("both B (or X, whose backward is a B) and I"),
            std::string::npos);
}

// `defer W EXPR`: in the phases a W runs only while more than EXPR input
// gradients of the rank wait for theirs; the rest run after the last I.
// The library's interleaved-zb (torch's ScheduleInterleavedZeroBubble)
// defers by `rank`: on p 2..6 x m 1..3p x chunks 1..3 where its `requires`
// holds, every rank r holds at most r unpaid I after its warm-up, runs the
// W in the order of their I, and ends with min(r + 1, its I) W after its
// last I (the last I's own W, then the r deferred); rank 0 runs each W right
// after its I.
TEST(Policy, DeferWTrailsEachWBehindItsIByTheCount) {
  const Policy *zb = libraryPolicy("interleaved-zb");
  ASSERT_NE(zb, nullptr);
  int points = 0;
  for (int p = 2; p <= 6; ++p)
    for (int m = 1; m <= 3 * p; ++m)
      for (int chunks = 1; chunks <= 3; ++chunks) {
        Problem problem = uniformProblem(p, m, chunks * p);
        llvm::Expected<bool> applies = policyApplies(*zb, problem, {});
        ASSERT_TRUE(bool(applies)) << errorOf(applies.takeError());
        if (!*applies)
          continue;
        ++points;
        const std::string where =
            fmt::format("p={} m={} chunks={}", p, m, chunks);
        llvm::Expected<Schedule> s = instantiatePolicy(*zb, problem);
        ASSERT_TRUE(bool(s)) << where << ": " << errorOf(s.takeError());
        for (int r = 0; r < p; ++r) {
          const std::vector<Action> &order = s->ranks[r];
          size_t lastI = 0, inputs = 0;
          for (size_t k = 0; k < order.size(); ++k)
            if (order[k].kind == ActionKind::BackwardInput) {
              lastI = k;
              ++inputs;
            }
          std::vector<std::pair<int, int>> unpaid;
          for (size_t k = 0; k < order.size(); ++k) {
            const Action &a = order[k];
            if (a.kind == ActionKind::BackwardInput)
              unpaid.push_back({a.stage, a.microbatch});
            else if (a.kind == ActionKind::BackwardWeight) {
              ASSERT_FALSE(unpaid.empty()) << where;
              EXPECT_EQ(unpaid.front(), std::make_pair(a.stage, a.microbatch))
                  << where << " rank " << r;
              unpaid.erase(unpaid.begin());
            }
            if (a.kind != ActionKind::Forward && k < lastI) {
              EXPECT_LE(unpaid.size(), static_cast<size_t>(r) + 1)
                  << where << " rank " << r << " at " << shortName(a);
            }
          }
          EXPECT_EQ(order.size() - 1 - lastI,
                    std::min(inputs, static_cast<size_t>(r) + 1))
              << where << " rank " << r;
        }
      }
  EXPECT_GT(points, 60);
}

TEST(Policy, DeferWIsCheckedWhereItIsWritten) {
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 0\nsteady F I W\n"
                                "defer I 2\n")),
            "line 4: expected 'defer W EXPR'");
  EXPECT_EQ(errorOf(parsePolicy("policy x\nwarmup 0\nsteady F B\n"
                                "defer W 1\n")),
            "line 4: 'defer W' needs a steady pattern with W");
  EXPECT_NE(errorOf(parsePolicy("policy x\nwarmup 0\nsteady F I W\n"
                                "defer W in_flight\n"))
                .find("line 4, column 9"),
            std::string::npos);
  Policy negative = parsed("policy neg\nwarmup ranks - rank - 1\n"
                           "steady F I W\ndefer W rank - 1\n");
  EXPECT_EQ(errorOf(instantiatePolicy(negative, uniformProblem(2, 4, 2))),
            "policy neg at ranks=2 microbatches=4 stages=2: defer W is -1 on "
            "rank 0: it must be at least 0");
  // Deferring by 0 is the pattern as written.
  Policy plain = parsed("policy a\nwarmup ranks - rank - 1\nsteady F I W\n");
  Policy zero = parsed("policy b\nwarmup ranks - rank - 1\nsteady F I W\n"
                       "defer W 0\n");
  expectSamePolicyOrders(plain, zero, uniformProblem(4, 8, 4), "defer W 0");
}
