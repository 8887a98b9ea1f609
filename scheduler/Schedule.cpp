//===- Schedule.cpp - Per-rank ordered actions ----------------------------===//
//
// Names and letters of actions, shared by diagnostics, the dialect and the
// PyTorch CSV format.
//
//===----------------------------------------------------------------------===//

#include "scheduler/Schedule.h"

#include <fmt/format.h>

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
  }
  llvm_unreachable("unknown action kind");
}

std::optional<ActionKind> stagecraft::pipe::sched::actionKindFromLetter(char letter) {
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
  }
  llvm_unreachable("unknown action kind");
}

std::string stagecraft::pipe::sched::describeAction(const Problem &problem,
                                        const Action &action) {
  std::string stage = action.stage >= 0 && action.stage < problem.numStages()
                          ? problem.stages[action.stage].name
                          : fmt::format("#{}", action.stage);
  return fmt::format("{} @{} mb {}", actionOpName(action.kind).str(), stage,
                     action.microbatch);
}

std::vector<int> Schedule::stagesOf(int rank) const {
  std::vector<int> result;
  for (int s = 0, e = static_cast<int>(placement.size()); s < e; ++s)
    if (placement[s] == rank)
      result.push_back(s);
  return result;
}
