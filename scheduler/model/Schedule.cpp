//===- Schedule.cpp - Per-rank ordered actions ----------------------------===//
//
// Names and letters of actions, shared by diagnostics, the dialect and the
// PyTorch CSV format.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/Schedule.h"

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>

using namespace stagecraft::pipe::sched;

char stagecraft::pipe::sched::actionLetter(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return 'F';
  case ActionKind::BackwardInput:
    return 'I';
  case ActionKind::BackwardWeight:
    return 'W';
  case ActionKind::Backward:
    return 'B';
  case ActionKind::ForwardBackward:
    return 'X';
  case ActionKind::AttentionForward:
    return 'A';
  case ActionKind::AttentionBackward:
    return 'G';
  }
  llvm_unreachable("unknown action kind");
}

std::optional<ActionKind>
stagecraft::pipe::sched::actionKindFromLetter(char letter) {
  switch (letter) {
  case 'F':
    return ActionKind::Forward;
  case 'I':
    return ActionKind::BackwardInput;
  case 'W':
    return ActionKind::BackwardWeight;
  case 'B':
    return ActionKind::Backward;
  default:
    return std::nullopt;
  }
}

llvm::StringRef stagecraft::pipe::sched::actionOpName(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "forward";
  case ActionKind::BackwardInput:
    return "backward_input";
  case ActionKind::BackwardWeight:
    return "backward_weight";
  case ActionKind::Backward:
    return "backward";
  case ActionKind::ForwardBackward:
    return "forward_backward";
  case ActionKind::AttentionForward:
    return "attention_forward";
  case ActionKind::AttentionBackward:
    return "attention_backward";
  }
  llvm_unreachable("unknown action kind");
}

std::string stagecraft::pipe::sched::describeAction(const Problem &problem,
                                                    const Action &action) {
  auto name = [&](int stage) {
    return stage >= 0 && stage < problem.numStages()
               ? problem.stages[stage].name
               : fmt::format("#{}", stage);
  };
  std::string text =
      fmt::format("{} @{} mb {}", actionOpName(action.kind).str(),
                  name(action.stage), action.microbatch);
  if (action.kind == ActionKind::ForwardBackward)
    text += fmt::format(", @{} mb {}", name(action.backwardStage),
                        action.backwardMicrobatch);
  return text;
}

std::string stagecraft::pipe::sched::shortName(const Action &action) {
  if (action.kind == ActionKind::ForwardBackward)
    return fmt::format("{}F{}+{}B{}", action.stage, action.microbatch,
                       action.backwardStage, action.backwardMicrobatch);
  return fmt::format("{}{}{}", action.stage, actionLetter(action.kind),
                     action.microbatch);
}

std::string stagecraft::pipe::sched::torchName(const Action &action) {
  std::string out;
  appendTorchName(out, action);
  return out;
}

void stagecraft::pipe::sched::appendTorchName(std::string &out,
                                              const Action &action) {
  auto to = std::back_inserter(out);
  if (action.kind == ActionKind::ForwardBackward)
    fmt::format_to(to, FMT_COMPILE("({}F{};{}B{})OVERLAP_F_B"), action.stage,
                   action.microbatch, action.backwardStage,
                   action.backwardMicrobatch);
  else
    fmt::format_to(to, FMT_COMPILE("{}{}{}"), action.stage,
                   actionLetter(action.kind), action.microbatch);
}

std::vector<int> Schedule::stagesOf(int rank) const {
  std::vector<int> result;
  for (int s = 0, e = static_cast<int>(placement.size()); s < e; ++s)
    if (placement[s] == rank)
      result.push_back(s);
  return result;
}

llvm::StringRef stagecraft::pipe::sched::recomputeName(Recompute mode) {
  switch (mode) {
  case Recompute::None:
    return "none";
  case Recompute::Full:
    return "full";
  case Recompute::Selective:
    return "selective";
  }
  llvm_unreachable("unknown recompute mode");
}

std::optional<Recompute>
stagecraft::pipe::sched::parseRecompute(llvm::StringRef name) {
  if (name == "none")
    return Recompute::None;
  if (name == "full")
    return Recompute::Full;
  if (name == "selective")
    return Recompute::Selective;
  return std::nullopt;
}

void RecomputeTable::set(int stage, int microbatch, Recompute mode,
                         int numStages, int numMicrobatches) {
  if (table.empty()) {
    if (mode == Recompute::None)
      return;
    assignAll(numStages, numMicrobatches, Recompute::None);
  }
  table[stage][microbatch] = mode;
}

void RecomputeTable::assignAll(int numStages, int numMicrobatches,
                               Recompute mode) {
  table.assign(numStages, std::vector<Recompute>(numMicrobatches, mode));
}

bool RecomputeTable::any() const {
  for (const std::vector<Recompute> &row : table)
    for (Recompute r : row)
      if (r != Recompute::None)
        return true;
  return false;
}

int RecomputeTable::count(Recompute mode) const {
  int n = 0;
  for (const std::vector<Recompute> &row : table)
    for (Recompute r : row)
      n += r == mode;
  return n;
}

bool RecomputeTable::operator==(const RecomputeTable &other) const {
  size_t rows = std::max(table.size(), other.table.size());
  for (size_t s = 0; s < rows; ++s) {
    size_t cols = std::max(s < table.size() ? table[s].size() : 0,
                           s < other.table.size() ? other.table[s].size() : 0);
    for (size_t m = 0; m < cols; ++m)
      if (at(s, m) != other.at(s, m))
        return false;
  }
  return true;
}

namespace {
/// The messages \p a exchanges with other ranks: those it sends
/// (\p incoming false) or those it receives.
int crossRankPeers(const Problem &problem, const std::vector<int> &placement,
                   const Action &a, bool incoming) {
  const int n = problem.numStages();
  auto elsewhere = [&](int from, const std::vector<int> &peers) {
    int count = 0;
    for (int peer : peers)
      if (from >= 0 && from < n && peer >= 0 && peer < n &&
          from < static_cast<int>(placement.size()) &&
          peer < static_cast<int>(placement.size()) &&
          placement[peer] != placement[from])
        ++count;
    return count;
  };
  // A forward sends to its consumers and receives from its inputs; a
  // backward the other way round.
  auto forward = [&](int s) {
    return elsewhere(s,
                     incoming ? problem.inputsOf(s) : problem.consumersOf(s));
  };
  auto backward = [&](int s) {
    return elsewhere(s,
                     incoming ? problem.consumersOf(s) : problem.inputsOf(s));
  };
  switch (a.kind) {
  case ActionKind::Forward:
    return forward(a.stage);
  case ActionKind::BackwardInput:
  case ActionKind::Backward:
    return backward(a.stage);
  case ActionKind::ForwardBackward:
    return forward(a.stage) + backward(a.backwardStage);
  default:
    return 0;
  }
}
} // namespace

int stagecraft::pipe::sched::crossRankMessages(
    const Problem &problem, const std::vector<int> &placement,
    const Action &a) {
  return crossRankPeers(problem, placement, a, /*incoming=*/false);
}

int stagecraft::pipe::sched::crossRankInputs(const Problem &problem,
                                             const std::vector<int> &placement,
                                             const Action &a) {
  return crossRankPeers(problem, placement, a, /*incoming=*/true);
}
