//===- Policy.cpp - Schedule families users write -------------------------===//
//
// See Policy.h. Instantiation builds each rank's forward sequence (its
// stages' forwards, `group` microbatches at a time through all its stages)
// and backward sequence (the same, stages reversed), then either reads the
// phases (warm-up forwards, then the pattern, which drains the backwards
// once no forward is left) or list-schedules by the rules on the problem's
// costs: whenever a rank is free, it starts the first rule's action that is
// ready. The result goes through verifySchedule like any kind's.
//
//===----------------------------------------------------------------------===//

#include "scheduler/policy/Policy.h"

#include "scheduler/lower/Program.h"
#include "scheduler/model/Simulator.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <set>

using namespace stagecraft::pipe::sched;

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

const std::vector<std::string> kShapeNames = {"rank", "ranks", "microbatches",
                                              "chunks", "stages"};
const std::vector<std::string> kRuleNames = {
    "stage", "microbatch", "forwards_issued", "backwards_done", "in_flight"};
// What an order key (`forwards by`, `backwards by`) reads beside the shape.
const std::vector<std::string> kKeyNames = {"stage", "microbatch", "chunk"};

std::optional<ActionKind> kindNamed(llvm::StringRef word) {
  if (word == "F")
    return ActionKind::Forward;
  if (word == "B")
    return ActionKind::Backward;
  if (word == "I")
    return ActionKind::BackwardInput;
  if (word == "W")
    return ActionKind::BackwardWeight;
  if (word == "X")
    return ActionKind::ForwardBackward;
  return std::nullopt;
}

} // namespace

llvm::Expected<Policy>
stagecraft::pipe::sched::parsePolicy(llvm::StringRef text) {
  Policy policy;
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  // Parameters are declared before use, so the names grow as lines are read.
  std::vector<std::string> shape = kShapeNames;
  auto expr = [&](llvm::StringRef body, int line, int offset,
                  bool rule) -> llvm::Expected<PolicyExpr> {
    std::vector<std::string> names = shape;
    if (rule)
      names.insert(names.end(), kRuleNames.begin(), kRuleNames.end());
    llvm::Expected<PolicyExpr> e = parsePolicyExpr(body, names);
    if (!e) {
      std::string what = llvm::toString(e.takeError());
      // "column N: ..." counted within the expression: make it the line's.
      int column = 0;
      if (llvm::StringRef(what).consume_front("column ")) {
        llvm::StringRef rest = llvm::StringRef(what).drop_front(7);
        auto [num, tail] = rest.split(':');
        if (!num.getAsInteger(10, column))
          what = fmt::format("line {}, column {}:{}", line, column + offset,
                             tail.str());
      }
      return fail(what);
    }
    return e;
  };
  for (size_t k = 0; k < lines.size(); ++k) {
    const int line = static_cast<int>(k) + 1;
    llvm::StringRef raw = lines[k];
    llvm::StringRef content = raw.split('#').first.rtrim();
    llvm::StringRef trimmed = content.ltrim();
    if (trimmed.empty())
      continue;
    const int indent = static_cast<int>(content.size() - trimmed.size());
    auto [word, rest] = trimmed.split(' ');
    rest = rest.ltrim();
    // Column (1-based) where `rest` starts on the line.
    const int restAt =
        indent + static_cast<int>(trimmed.size() - rest.size()) + 1;
    auto at = [&](const std::string &what) {
      return fail(fmt::format("line {}: {}", line, what));
    };
    if (policy.name.empty() && word != "policy")
      return at("a policy starts with 'policy NAME'");
    if (word != "rule" && word != "param" && word != "requires" &&
        policy.lines.count(word.str()))
      return at(fmt::format("'{}' given twice (first on line {})", word.str(),
                            policy.lines[word.str()]));
    policy.lines.emplace(word.str(), line);
    if (word == "policy") {
      if (rest.empty() || rest.contains(' '))
        return at("expected 'policy NAME'");
      policy.name = rest.str();
    } else if (word == "placement") {
      if (rest == "loop")
        policy.placement = Policy::Placement::Loop;
      else if (rest == "v")
        policy.placement = Policy::Placement::V;
      else {
        std::vector<std::string> saved = shape;
        shape.push_back("stage");
        llvm::Expected<PolicyExpr> e = expr(rest, line, restAt - 1, false);
        shape = saved;
        if (!e)
          return e.takeError();
        policy.placement = Policy::Placement::Expr;
        policy.placementExpr = std::move(*e);
      }
    } else if ((word == "forwards" || word == "backwards") &&
               rest.starts_with("by ")) {
      // An order key over the rank's actions.
      llvm::StringRef body = rest.drop_front(3).ltrim();
      std::vector<std::string> saved = shape;
      shape.insert(shape.end(), kKeyNames.begin(), kKeyNames.end());
      llvm::Expected<PolicyExpr> e =
          expr(body, line,
               restAt - 1 + static_cast<int>(rest.size() - body.size()), false);
      shape = saved;
      if (!e)
        return e.takeError();
      (word == "forwards" ? policy.forwardKey : policy.backwardKey) =
          std::move(*e);
    } else if (word == "backwards") {
      if (rest == "reversed")
        policy.backwardsReversed = true;
      else if (rest != "in-order")
        return at("expected 'backwards reversed', 'backwards in-order' or "
                  "'backwards by EXPR'");
    } else if (word == "forwards") {
      return at("expected 'forwards by EXPR'");
    } else if (word == "group" || word == "warmup" || word == "cap" ||
               word == "requires") {
      llvm::Expected<PolicyExpr> e = expr(rest, line, restAt - 1, false);
      if (!e)
        return e.takeError();
      if (word == "group")
        policy.group = std::move(*e);
      else if (word == "warmup")
        policy.warmup = std::move(*e);
      else if (word == "cap")
        policy.cap = std::move(*e);
      else {
        policy.requirements.push_back(std::move(*e));
        policy.requirementLines.push_back(line);
      }
    } else if (word == "defer") {
      llvm::StringRef body = rest;
      if (!body.consume_front("W ") || body.trim().empty())
        return at("expected 'defer W EXPR'");
      body = body.ltrim();
      llvm::Expected<PolicyExpr> e =
          expr(body, line,
               restAt - 1 + static_cast<int>(rest.size() - body.size()), false);
      if (!e)
        return e.takeError();
      policy.deferW = std::move(*e);
    } else if (word == "steady") {
      llvm::SmallVector<llvm::StringRef> tokens;
      rest.split(tokens, ' ', -1, false);
      for (llvm::StringRef t : tokens) {
        std::optional<ActionKind> kind = kindNamed(t);
        if (!kind)
          return at(
              fmt::format("'{}' is not an action (F, B, I, W or X)", t.str()));
        policy.steady.push_back(*kind);
      }
      if (policy.steady.empty())
        return at("'steady' needs a pattern of F, B, I, W");
    } else if (word == "rule") {
      auto [kindWord, tail] = rest.split(' ');
      std::optional<ActionKind> kind = kindNamed(kindWord);
      if (!kind)
        return at(fmt::format("'{}' is not an action (F, B, I or W)",
                              kindWord.str()));
      Policy::Rule rule{*kind, std::nullopt, line};
      tail = tail.ltrim();
      if (!tail.empty()) {
        if (!tail.consume_front("when"))
          return at("expected 'rule KIND' or 'rule KIND when EXPR'");
        int offset = static_cast<int>(content.size() - tail.size());
        llvm::Expected<PolicyExpr> e = expr(tail, line, offset, true);
        if (!e)
          return e.takeError();
        rule.when = std::move(*e);
      }
      policy.rules.push_back(std::move(rule));
    } else if (word == "param") {
      // NAME LO..HI [= DEFAULT]
      auto [name, range] = rest.split(' ');
      auto [span, fallback] = range.split('=');
      auto [lo, hi] = span.trim().split("..");
      Policy::Param p;
      p.name = name.str();
      if (p.name.empty() ||
          !(std::isalpha(static_cast<unsigned char>(p.name[0])) ||
            p.name[0] == '_'))
        return at("expected 'param NAME LO..HI [= DEFAULT]'");
      if (llvm::is_contained(shape, p.name) ||
          llvm::is_contained(kRuleNames, p.name) ||
          llvm::is_contained(kKeyNames, p.name))
        return at(fmt::format("parameter '{}' is already a name", p.name));
      if (lo.trim().getAsInteger(10, p.lo) || hi.trim().getAsInteger(10, p.hi))
        return at("expected 'param NAME LO..HI [= DEFAULT]' with integer "
                  "bounds");
      if (p.lo > p.hi)
        return at(fmt::format("parameter '{}' has an empty range {}..{}",
                              p.name, p.lo, p.hi));
      p.value = p.lo;
      if (!fallback.trim().empty() && fallback.trim().getAsInteger(10, p.value))
        return at("the default after '=' must be an integer");
      if (p.value < p.lo || p.value > p.hi)
        return at(fmt::format("the default {} is outside {}..{}", p.value, p.lo,
                              p.hi));
      policy.params.push_back(p);
      shape.push_back(p.name);
    } else {
      return at(
          fmt::format("unknown statement '{}' (policy, placement, "
                      "group, forwards, backwards, warmup, steady, defer, "
                      "rule, param, cap, requires)",
                      word.str()));
    }
  }
  if (policy.name.empty())
    return fail("line 1: a policy starts with 'policy NAME'");
  const bool phases = policy.warmup || !policy.steady.empty();
  if (phases && (!policy.warmup || policy.steady.empty()))
    return fail(fmt::format("policy {}: phases need both 'warmup' and "
                            "'steady'",
                            policy.name));
  if (policy.deferW &&
      !llvm::is_contained(policy.steady, ActionKind::BackwardWeight))
    return fail(fmt::format("line {}: 'defer W' needs a steady pattern "
                            "with W",
                            policy.lines.at("defer")));
  const bool overlaps =
      llvm::is_contained(policy.steady, ActionKind::ForwardBackward);
  if (overlaps && !policy.rules.empty())
    return fail(fmt::format("policy {}: a pattern with 'X' (F&B overlap) "
                            "orders every action itself; rules beside it "
                            "are not supported",
                            policy.name));
  // Together, the phases order the kinds of their pattern (and F) and the
  // rules the kinds it leaves out.
  if (phases)
    for (const Policy::Rule &rule : policy.rules) {
      if (rule.kind == ActionKind::ForwardBackward)
        return fail(fmt::format(
            "line {}: 'rule X': X starts the next F and B, which the phases "
            "order; beside phases, rules order only the kinds the pattern "
            "leaves out",
            rule.line));
      if (rule.kind == ActionKind::Forward ||
          llvm::is_contained(policy.steady, rule.kind))
        return fail(fmt::format(
            "line {}: 'rule {}': the phases order {} (warmup, steady '{}'); "
            "beside phases, rules order only the kinds the pattern leaves "
            "out",
            rule.line, actionLetter(rule.kind), actionLetter(rule.kind),
            llvm::join(llvm::map_range(policy.steady,
                                       [](ActionKind k) {
                                         return std::string(1, actionLetter(k));
                                       }),
                       " ")));
    }
  if (!phases && policy.rules.empty())
    return fail(fmt::format("policy {}: no order: give 'warmup' and "
                            "'steady', or 'rule' lines",
                            policy.name));
  return policy;
}

namespace {

/// The values every expression of one instantiation reads.
struct Scope {
  llvm::StringMap<int64_t> values;
  std::optional<int64_t> operator()(llvm::StringRef name) const {
    auto it = values.find(name);
    if (it == values.end())
      return std::nullopt;
    return it->second;
  }
};

std::string point(const Problem &problem) {
  return fmt::format("ranks={} microbatches={} stages={}", problem.ranks,
                     problem.microbatches, problem.numStages());
}

} // namespace

llvm::Expected<bool> stagecraft::pipe::sched::policyApplies(
    const Policy &policy, const Problem &problem, const PolicyParams &params,
    std::string *why) {
  Scope scope;
  scope.values = {{"ranks", problem.ranks},
                  {"microbatches", problem.microbatches},
                  {"stages", problem.numStages()},
                  {"chunks", problem.numStages() / std::max(1, problem.ranks)},
                  {"rank", 0}};
  for (const Policy::Param &p : policy.params) {
    auto it = params.find(p.name);
    scope.values[p.name] = it == params.end() ? p.value : it->second;
  }
  for (size_t k = 0; k < policy.requirements.size(); ++k) {
    const PolicyExpr &r = policy.requirements[k];
    llvm::Expected<int64_t> v = evaluatePolicyExpr(r, scope);
    if (!v)
      return fail(fmt::format("requires (line {}): {}",
                              policy.requirementLines[k],
                              llvm::toString(v.takeError())));
    if (*v == 0) {
      if (why)
        *why = fmt::format("{} (line {})", r.str(), policy.requirementLines[k]);
      return false;
    }
  }
  return true;
}

llvm::Expected<Schedule> stagecraft::pipe::sched::instantiatePolicy(
    const Policy &policy, const Problem &problem, const PolicyParams &params) {
  const int p = problem.ranks, m = problem.microbatches,
            n = problem.numStages();
  const std::string where =
      fmt::format("policy {} at {}", policy.name, point(problem));
  auto failAt = [&](const std::string &what) {
    return fail(fmt::format("{}: {}", where, what));
  };
  if (!problem.isChain())
    return failAt("policies schedule chains of stages; this pipeline "
                  "branches");
  for (const auto &[name, value] : params) {
    auto it = llvm::find_if(
        policy.params, [&](const Policy::Param &q) { return q.name == name; });
    if (it == policy.params.end())
      return failAt(fmt::format("no parameter '{}'", name));
    if (value < it->lo || value > it->hi)
      return failAt(fmt::format("parameter {}={} is outside {}..{}", name,
                                value, it->lo, it->hi));
  }
  std::string why;
  llvm::Expected<bool> applies = policyApplies(policy, problem, params, &why);
  if (!applies)
    return failAt(llvm::toString(applies.takeError()));
  if (!*applies)
    return failAt(fmt::format("outside the policy's requires: {}", why));
  if (n % p != 0)
    return failAt(fmt::format("{} stages do not divide over {} ranks", n, p));
  const int chunks = n / p;
  Scope scope;
  scope.values = {
      {"ranks", p}, {"microbatches", m}, {"stages", n}, {"chunks", chunks}};
  for (const Policy::Param &q : policy.params) {
    auto it = params.find(q.name);
    scope.values[q.name] = it == params.end() ? q.value : it->second;
  }
  auto eval = [&](const PolicyExpr &e,
                  const char *statement) -> llvm::Expected<int64_t> {
    llvm::Expected<int64_t> v = evaluatePolicyExpr(e, scope);
    if (!v)
      return failAt(fmt::format(
          "{} (line {}): {}", statement,
          policy.lines.count(statement) ? policy.lines.at(statement) : 0,
          llvm::toString(v.takeError())));
    return v;
  };

  // Placement.
  Schedule schedule;
  schedule.placement.resize(n);
  for (int s = 0; s < n; ++s) {
    const int c = s / p, pos = s % p;
    int r = pos;
    if (policy.placement == Policy::Placement::V)
      r = c % 2 == 0 ? pos : p - 1 - pos;
    else if (policy.placement == Policy::Placement::Expr) {
      scope.values["stage"] = s;
      llvm::Expected<int64_t> v = eval(*policy.placementExpr, "placement");
      if (!v)
        return v.takeError();
      if (*v < 0 || *v >= p)
        return failAt(fmt::format("placement puts stage {} on rank {}, "
                                  "outside 0..{}",
                                  s, *v, p - 1));
      r = static_cast<int>(*v);
    }
    schedule.placement[s] = r;
  }
  scope.values.erase("stage");
  std::vector<std::vector<int>> local(p);
  for (int s = 0; s < n; ++s)
    local[schedule.placement[s]].push_back(s);
  for (int r = 0; r < p; ++r)
    if (static_cast<int>(local[r].size()) != chunks)
      return failAt(fmt::format("placement gives rank {} {} stages, not {} "
                                "(stages / ranks)",
                                r, local[r].size(), chunks));

  int64_t group = p;
  if (policy.group) {
    llvm::Expected<int64_t> g = eval(*policy.group, "group");
    if (!g)
      return g.takeError();
    if (*g < 1)
      return failAt(fmt::format("group is {}; it must be at least 1", *g));
    group = *g;
  }
  // Each rank's forward and backward sequences.
  const bool split = llvm::any_of(policy.steady,
                                  [](ActionKind k) {
                                    return k == ActionKind::BackwardInput;
                                  }) ||
                     llvm::any_of(policy.rules, [](const Policy::Rule &rule) {
                       return rule.kind == ActionKind::BackwardInput;
                     });
  const bool fused = llvm::any_of(policy.steady,
                                  [](ActionKind k) {
                                    return k == ActionKind::Backward ||
                                           k == ActionKind::ForwardBackward;
                                  }) ||
                     llvm::any_of(policy.rules, [](const Policy::Rule &rule) {
                       return rule.kind == ActionKind::Backward ||
                              rule.kind == ActionKind::ForwardBackward;
                     });
  if (split && fused)
    return failAt("the policy runs both B (or X, whose backward is a B) "
                  "and I: write the backward fused (B) or split (I and W)");
  if (!split && !fused)
    return failAt("the policy runs no backward: give B, or I and W");
  const ActionKind backward =
      split ? ActionKind::BackwardInput : ActionKind::Backward;
  std::vector<std::vector<Action>> fSeq(p), bSeq(p);
  for (int r = 0; r < p; ++r)
    for (int64_t g0 = 0; g0 < m; g0 += group) {
      const int g1 = static_cast<int>(std::min<int64_t>(m, g0 + group));
      for (int s : local[r])
        for (int mb = static_cast<int>(g0); mb < g1; ++mb)
          fSeq[r].push_back({ActionKind::Forward, s, mb});
      for (auto it = local[r].rbegin(); it != local[r].rend(); ++it)
        for (int k = static_cast<int>(g0); k < g1; ++k)
          bSeq[r].push_back({backward, *it,
                             policy.backwardsReversed
                                 ? g1 - 1 - (k - static_cast<int>(g0))
                                 : k});
    }

  // Order keys: each rank's sequence sorted by its key, stably.
  auto orderBy = [&](std::vector<std::vector<Action>> &seqs,
                     const PolicyExpr &key,
                     const char *statement) -> llvm::Error {
    for (int r = 0; r < p; ++r) {
      scope.values["rank"] = r;
      std::vector<std::pair<int64_t, size_t>> keyed;
      for (size_t k = 0; k < seqs[r].size(); ++k) {
        const Action &a = seqs[r][k];
        scope.values["stage"] = a.stage;
        scope.values["microbatch"] = a.microbatch;
        scope.values["chunk"] =
            llvm::find(local[r], a.stage) - local[r].begin();
        llvm::Expected<int64_t> v = eval(key, statement);
        if (!v)
          return v.takeError();
        keyed.push_back({*v, k});
      }
      llvm::stable_sort(keyed, [](const auto &x, const auto &y) {
        return x.first < y.first;
      });
      std::vector<Action> sorted;
      for (const auto &[v, k] : keyed)
        sorted.push_back(seqs[r][k]);
      seqs[r] = std::move(sorted);
    }
    for (const char *name : {"stage", "microbatch", "chunk"})
      scope.values.erase(name);
    return llvm::Error::success();
  };
  if (policy.forwardKey)
    if (llvm::Error e = orderBy(fSeq, *policy.forwardKey, "forwards"))
      return std::move(e);
  if (policy.backwardKey)
    if (llvm::Error e = orderBy(bSeq, *policy.backwardKey, "backwards"))
      return std::move(e);

  std::optional<int64_t> cap;
  schedule.ranks.assign(p, {});
  if (policy.cap) {
    for (int r = 0; r < p; ++r) {
      scope.values["rank"] = r;
      llvm::Expected<int64_t> c = eval(*policy.cap, "cap");
      if (!c)
        return c.takeError();
      if (*c < 1)
        return failAt(fmt::format("cap is {} on rank {}: below one "
                                  "activation, no forward could start",
                                  *c, r));
    }
  }

  if (policy.warmup) {
    // Phases: a static order per rank.
    for (int r = 0; r < p; ++r) {
      scope.values["rank"] = r;
      llvm::Expected<int64_t> w = eval(*policy.warmup, "warmup");
      if (!w)
        return w.takeError();
      size_t deferred = 0;
      if (policy.deferW) {
        llvm::Expected<int64_t> d = eval(*policy.deferW, "defer");
        if (!d)
          return d.takeError();
        if (*d < 0)
          return failAt(fmt::format("defer W is {} on rank {}: it must be "
                                    "at least 0",
                                    *d, r));
        deferred = static_cast<size_t>(*d);
      }
      // The drain after the pattern runs every W left.
      bool draining = false;
      std::vector<Action> &order = schedule.ranks[r];
      size_t f = 0, b = 0;
      std::deque<Action> pendingW;
      // (stage, microbatch) of the forwards placed: a backward follows its
      // own forward.
      std::set<std::pair<int, int>> forwarded;
      const size_t warm = static_cast<size_t>(
          std::clamp<int64_t>(*w, 0, static_cast<int64_t>(fSeq[r].size())));
      for (; f < warm; ++f) {
        forwarded.insert({fSeq[r][f].stage, fSeq[r][f].microbatch});
        order.push_back(fSeq[r][f]);
      }
      auto emitF = [&] {
        if (f >= fSeq[r].size())
          return false;
        forwarded.insert({fSeq[r][f].stage, fSeq[r][f].microbatch});
        order.push_back(fSeq[r][f++]);
        return true;
      };
      // The next backward, once its own forward is placed.
      auto canB = [&] {
        return b < bSeq[r].size() &&
               forwarded.count({bSeq[r][b].stage, bSeq[r][b].microbatch});
      };
      auto emitB = [&] {
        if (!canB())
          return false;
        Action a = bSeq[r][b++];
        order.push_back(a);
        if (split)
          pendingW.push_back(
              {ActionKind::BackwardWeight, a.stage, a.microbatch});
        return true;
      };
      auto emit = [&](ActionKind k) {
        switch (k) {
        case ActionKind::Forward:
          return emitF();
        case ActionKind::Backward:
        case ActionKind::BackwardInput:
          return emitB();
        case ActionKind::BackwardWeight:
          if (pendingW.empty() || (!draining && pendingW.size() <= deferred))
            return false;
          order.push_back(pendingW.front());
          pendingW.pop_front();
          return true;
        case ActionKind::ForwardBackward: {
          // The next forward overlapped with the next backward whose own
          // forward came earlier; either alone where the other is missing.
          if (!canB() || f >= fSeq[r].size())
            return emitF() || emitB();
          const Action &fw = fSeq[r][f++], &bw = bSeq[r][b++];
          forwarded.insert({fw.stage, fw.microbatch});
          order.push_back(Action::overlapped(fw.stage, fw.microbatch, bw.stage,
                                             bw.microbatch));
          return true;
        }
        default:
          return false;
        }
      };
      for (bool progress = true; progress;) {
        progress = false;
        for (ActionKind k : policy.steady)
          progress |= emit(k);
      }
      // What the pattern could not place (a pattern without B, I or W).
      // Beside rules, the W the pattern leaves out are the rules' to place.
      while (b < bSeq[r].size() && emit(backward)) {
      }
      draining = true;
      while (policy.rules.empty() && !pendingW.empty())
        emit(ActionKind::BackwardWeight);
      if (f < fSeq[r].size() || b < bSeq[r].size())
        return failAt(fmt::format(
            "rank {}: the pattern '{}' after {} warm-up forwards never "
            "places {} of its forwards and {} of its backwards",
            r,
            llvm::join(llvm::map_range(policy.steady,
                                       [](ActionKind k) {
                                         return std::string(1, actionLetter(k));
                                       }),
                       " "),
            warm, fSeq[r].size() - f, bSeq[r].size() - b));
    }
  }
  if (!policy.rules.empty()) {
    // Rules: list scheduling on the problem's costs. Beside phases, a rank
    // starts the next action of its phases order when it is ready (and the
    // cap admits a forward), and otherwise the first ready action a rule
    // allows: rules fill the waits of the static order.
    std::vector<std::vector<Action>> backbone;
    if (policy.warmup) {
      backbone = std::move(schedule.ranks);
      schedule.ranks.assign(p, {});
    }
    struct RankState {
      size_t next = 0; // in the rank's phases order
      size_t f = 0, b = 0;
      std::deque<Action> pendingW;
      double freeAt = 0.0;
      int64_t forwards = 0, backwards = 0, inFlight = 0;
    };
    std::vector<RankState> state(p);
    // End time of each (kind, stage, microbatch) started so far.
    // Indexed by (kind, stage, microbatch); NaN: not started.
    std::vector<double> ends(size_t(4) * n * m,
                             std::numeric_limits<double>::quiet_NaN());
    auto slot = [&](ActionKind k, int s, int mb) -> double & {
      return ends[(static_cast<size_t>(k) * n + s) * m + mb];
    };
    auto endOf = [&](ActionKind k, int s, int mb) -> std::optional<double> {
      double e = slot(k, s, mb);
      if (std::isnan(e))
        return std::nullopt;
      return e;
    };
    auto cost = [&](const Action &a) {
      const Stage &st = problem.stages[a.stage];
      if (a.kind == ActionKind::ForwardBackward)
        return overlappedCost(st, problem.stages[a.backwardStage]) *
               problem.costScale(a.stage, a.microbatch) /
               problem.speedOf(schedule.placement[a.stage]);
      double c = a.kind == ActionKind::Forward          ? st.forward
                 : a.kind == ActionKind::BackwardInput  ? st.backwardInput
                 : a.kind == ActionKind::BackwardWeight ? st.backwardWeight
                                                        : st.backward();
      return c * problem.costScale(a.stage, a.microbatch) /
             problem.speedOf(schedule.placement[a.stage]);
    };
    // When `a`'s inputs are on its rank, or what it waits for.
    std::function<std::optional<double>(const Action &, std::string *)> readyAt;
    readyAt = [&](const Action &a,
                  std::string *waits) -> std::optional<double> {
      if (a.kind == ActionKind::ForwardBackward) {
        std::optional<double> f =
            readyAt({ActionKind::Forward, a.stage, a.microbatch}, waits);
        if (!f)
          return std::nullopt;
        std::optional<double> b =
            readyAt({backward, a.backwardStage, a.backwardMicrobatch}, waits);
        if (!b)
          return std::nullopt;
        return std::max(*f, *b);
      }
      const int r = schedule.placement[a.stage];
      auto from = [&](ActionKind k, int s) -> std::optional<double> {
        std::optional<double> e = endOf(k, s, a.microbatch);
        if (!e) {
          if (waits)
            *waits = fmt::format("{}{}{}", s, actionLetter(k), a.microbatch);
          return std::nullopt;
        }
        const int src = schedule.placement[s];
        return *e +
               (src == r ? 0.0 : problem.transferTime(src, r, s, a.microbatch));
      };
      if (a.kind == ActionKind::Forward)
        return a.stage == 0 ? std::optional<double>(0.0)
                            : from(ActionKind::Forward, a.stage - 1);
      if (a.kind == ActionKind::BackwardWeight)
        return from(ActionKind::BackwardInput, a.stage);
      std::optional<double> own = from(ActionKind::Forward, a.stage);
      if (!own || a.stage == n - 1)
        return own;
      std::optional<double> down = from(backward, a.stage + 1);
      if (!down)
        return std::nullopt;
      return std::max(*own, *down);
    };
    auto head = [&](int r, ActionKind k) -> std::optional<Action> {
      RankState &st = state[r];
      if (k == ActionKind::Forward)
        return st.f < fSeq[r].size() ? std::optional<Action>(fSeq[r][st.f])
                                     : std::nullopt;
      if (k == ActionKind::BackwardWeight)
        return st.pendingW.empty() ? std::nullopt
                                   : std::optional<Action>(st.pendingW.front());
      if (k == ActionKind::ForwardBackward) {
        // The next forward with the next backward, both of this rank.
        if (st.f >= fSeq[r].size() || st.b >= bSeq[r].size())
          return std::nullopt;
        const Action &fw = fSeq[r][st.f], &bw = bSeq[r][st.b];
        return Action::overlapped(fw.stage, fw.microbatch, bw.stage,
                                  bw.microbatch);
      }
      if (k != backward)
        return std::nullopt;
      return st.b < bSeq[r].size() ? std::optional<Action>(bSeq[r][st.b])
                                   : std::nullopt;
    };
    size_t remaining = 0;
    for (int r = 0; r < p; ++r)
      remaining += fSeq[r].size() + bSeq[r].size() * (split ? 2 : 1);
    double now = 0.0;
    std::set<double> times = {0.0};
    int64_t &rankValue = scope.values["rank"];
    int64_t &forwardsValue = scope.values["forwards_issued"];
    int64_t &backwardsValue = scope.values["backwards_done"];
    int64_t &inFlightValue = scope.values["in_flight"];
    int64_t &stageValue = scope.values["stage"];
    int64_t &microbatchValue = scope.values["microbatch"];
    // Sets the scope's counters to rank `r`'s and evaluates the cap there.
    auto capOf = [&](int r) -> llvm::Expected<std::optional<int64_t>> {
      const RankState &st = state[r];
      rankValue = r;
      forwardsValue = st.forwards;
      backwardsValue = st.backwards;
      inFlightValue = st.inFlight;
      if (!policy.cap)
        return std::nullopt;
      llvm::Expected<int64_t> c = evaluatePolicyExpr(*policy.cap, scope);
      if (!c)
        return llvm::createStringError(
            fmt::format("cap (line {}): {}", policy.lines.at("cap"),
                        llvm::toString(c.takeError())));
      return std::optional<int64_t>(*c);
    };
    const bool anyX = llvm::any_of(policy.rules, [](const Policy::Rule &x) {
      return x.kind == ActionKind::ForwardBackward;
    });
    while (remaining > 0) {
      for (int r = 0; r < p; ++r) {
        RankState &st = state[r];
        if (st.freeAt > now)
          continue;
        llvm::Expected<std::optional<int64_t>> rankCap = capOf(r);
        if (!rankCap)
          return failAt(llvm::toString(rankCap.takeError()));
        cap = *rankCap;
        std::optional<Action> chosen;
        bool fromBackbone = false;
        if (!backbone.empty() && st.next < backbone[r].size()) {
          const Action &a = backbone[r][st.next];
          std::optional<double> ready = readyAt(a, nullptr);
          if (ready && *ready <= now + 1e-12 &&
              !(a.kind == ActionKind::Forward && cap && st.inFlight >= *cap)) {
            chosen = a;
            fromBackbone = true;
          }
        }
        for (const Policy::Rule &rule : policy.rules) {
          if (chosen)
            break;
          std::optional<Action> a = head(r, rule.kind);
          if (!a)
            continue;
          std::optional<double> ready = readyAt(*a, nullptr);
          if (!ready || *ready > now + 1e-12)
            continue;
          // X's forward counts against the cap as a forward does.
          if ((a->kind == ActionKind::Forward ||
               a->kind == ActionKind::ForwardBackward) &&
              cap && st.inFlight >= *cap)
            continue;
          if (rule.when) {
            stageValue = a->stage;
            microbatchValue = a->microbatch;
            llvm::Expected<int64_t> ok = evaluatePolicyExpr(*rule.when, scope);
            if (!ok)
              return failAt(fmt::format("rule on line {}: {}", rule.line,
                                        llvm::toString(ok.takeError())));
            if (*ok == 0)
              continue;
          }
          chosen = a;
          break;
        }
        if (!chosen)
          continue;
        const Action a = *chosen;
        if (fromBackbone)
          ++st.next;
        schedule.ranks[r].push_back(a);
        const double end = now + cost(a);
        st.freeAt = end;
        times.insert(end);
        // Each half of an X ends with it.
        llvm::SmallVector<Action, 2> halves = {a};
        if (a.kind == ActionKind::ForwardBackward)
          halves = {{ActionKind::Forward, a.stage, a.microbatch},
                    {backward, a.backwardStage, a.backwardMicrobatch}};
        for (const Action &h : halves) {
          slot(h.kind, h.stage, h.microbatch) = end;
          for (int s : {h.stage - 1, h.stage + 1})
            if (s >= 0 && s < n && schedule.placement[s] != r)
              times.insert(end + problem.transferTime(r, schedule.placement[s],
                                                      h.stage, h.microbatch));
        }
        remaining -= halves.size();
        if (a.kind == ActionKind::ForwardBackward) {
          // A forward in, a backward's activation out.
          ++st.f;
          ++st.forwards;
          ++st.b;
          ++st.backwards;
        } else if (a.kind == ActionKind::Forward) {
          ++st.f;
          ++st.forwards;
          ++st.inFlight;
        } else if (a.kind == ActionKind::BackwardWeight) {
          st.pendingW.pop_front();
          --st.inFlight;
        } else {
          ++st.b;
          ++st.backwards;
          if (split)
            st.pendingW.push_back(
                {ActionKind::BackwardWeight, a.stage, a.microbatch});
          else
            --st.inFlight;
        }
      }
      auto next = times.upper_bound(now);
      if (remaining > 0 && next == times.end()) {
        // Nothing runs and nothing will arrive: say why on each rank.
        std::vector<std::string> lines;
        for (int r = 0; r < p; ++r) {
          llvm::Expected<std::optional<int64_t>> rankCap = capOf(r);
          if (!rankCap)
            return failAt(llvm::toString(rankCap.takeError()));
          cap = *rankCap;
          std::vector<std::string> why;
          if (!backbone.empty() && state[r].next < backbone[r].size()) {
            const Action &a = backbone[r][state[r].next];
            std::string waits;
            if (!readyAt(a, &waits))
              why.push_back(fmt::format("{} (next in its phases order) "
                                        "waits for {}",
                                        shortName(a), waits));
            else
              why.push_back(fmt::format(
                  "{} (next in its phases order) is ready but the cap "
                  "holds it (in_flight {}, cap {})",
                  shortName(a), state[r].inFlight, cap.value_or(0)));
          }
          for (ActionKind k :
               {ActionKind::Forward, backward, ActionKind::BackwardWeight,
                ActionKind::ForwardBackward}) {
            if (!backbone.empty() && k != ActionKind::BackwardWeight)
              continue;
            if (k == ActionKind::ForwardBackward && !anyX)
              continue;
            std::optional<Action> a = head(r, k);
            if (!a)
              continue;
            std::string waits;
            std::optional<double> ready = readyAt(*a, &waits);
            const std::string name = shortName(*a);
            if (!ready)
              why.push_back(fmt::format("{} waits for {}", name, waits));
            else if (!llvm::any_of(policy.rules, [&](const Policy::Rule &x) {
                       return x.kind == k;
                     }))
              why.push_back(fmt::format("{} is ready but no rule starts {}",
                                        name, actionLetter(k)));
            else
              why.push_back(fmt::format(
                  "{} is ready but no rule for it holds (in_flight {}{})", name,
                  state[r].inFlight,
                  cap ? fmt::format(", cap {}", *cap) : std::string()));
          }
          if (!why.empty())
            lines.push_back(
                fmt::format("rank {}: {}", r, llvm::join(why, "; ")));
        }
        return failAt(fmt::format("no rank can start an action while {} "
                                  "remain: {}",
                                  remaining, llvm::join(lines, " | ")));
      }
      if (next != times.end())
        now = *next;
    }
  }
  if (llvm::Error invalid = verifySchedule(problem, schedule))
    return failAt(llvm::toString(std::move(invalid)));
  return schedule;
}

std::string
stagecraft::pipe::sched::describePolicyChoice(const Policy &policy,
                                              const PolicyParams &params) {
  std::string choice = policy.name;
  for (const Policy::Param &q : policy.params) {
    auto it = params.find(q.name);
    choice += fmt::format(" {}={}", q.name,
                          it == params.end() ? q.value : it->second);
  }
  return choice;
}

llvm::Expected<PolicyParams>
stagecraft::pipe::sched::parsePolicyParams(llvm::StringRef text) {
  PolicyParams values;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts) {
    auto [name, value] = part.split(':');
    int64_t v = 0;
    if (name.trim().empty() || value.trim().getAsInteger(10, v))
      return fail(fmt::format("params: '{}' is not NAME:INTEGER", part.str()));
    values[name.trim().str()] = v;
  }
  return values;
}

llvm::Expected<PolicyFamilyReport>
stagecraft::pipe::sched::verifyPolicyFamily(const Policy &policy,
                                            const PolicyFamily &family,
                                            const PolicyParams &params) {
  PolicyFamilyReport report;
  for (int p = family.ranksLo; p <= family.ranksHi; ++p)
    for (int v = family.chunksLo; v <= family.chunksHi; ++v)
      for (int m = family.microbatchesLo; m <= family.microbatchesHi; ++m) {
        Problem problem;
        problem.name = policy.name;
        problem.ranks = p;
        problem.microbatches = m;
        problem.latency = family.latency;
        for (int s = 0; s < p * v; ++s) {
          Stage st = family.stage;
          st.name = "s" + std::to_string(s);
          problem.stages.push_back(st);
        }
        llvm::Expected<bool> applies = policyApplies(policy, problem, params);
        if (!applies)
          return fail(fmt::format("policy {} at {}: {}", policy.name,
                                  point(problem),
                                  llvm::toString(applies.takeError())));
        if (!*applies) {
          ++report.skipped;
          continue;
        }
        llvm::Expected<Schedule> schedule =
            instantiatePolicy(policy, problem, params);
        if (!schedule)
          return schedule.takeError();
        Program program = lowerCommunication(problem, *schedule);
        if (llvm::Error hang = verifyProgram(problem, program))
          return fail(fmt::format("policy {} at {}: the lowered "
                                  "communication fails: {}",
                                  policy.name, point(problem),
                                  llvm::toString(std::move(hang))));
        ++report.held;
      }
  return report;
}
