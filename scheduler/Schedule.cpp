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
  case ActionKind::ForwardBackward:
    return 'X';
  case ActionKind::AttentionForward:
    return 'A';
  case ActionKind::AttentionBackward:
    return 'G';
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
  std::string text = fmt::format("{} @{} mb {}", actionOpName(action.kind).str(),
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
  if (action.kind == ActionKind::ForwardBackward)
    return fmt::format("({}F{};{}B{})OVERLAP_F_B", action.stage,
                       action.microbatch, action.backwardStage,
                       action.backwardMicrobatch);
  return shortName(action);
}

std::vector<int> Schedule::stagesOf(int rank) const {
  std::vector<int> result;
  for (int s = 0, e = static_cast<int>(placement.size()); s < e; ++s)
    if (placement[s] == rank)
      result.push_back(s);
  return result;
}
