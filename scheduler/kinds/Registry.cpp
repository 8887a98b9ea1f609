//===- Registry.cpp - Schedule kind names and dispatch -------------------===//
//
// Kind names and the `generateSchedule` entry point.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Helix.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

using namespace stagecraft::pipe::sched;

static constexpr ScheduleKind kAllKinds[] = {ScheduleKind::GPipe,
                                             ScheduleKind::OneFOneB,
                                             ScheduleKind::Interleaved1F1B,
                                             ScheduleKind::ZBH1,
                                             ScheduleKind::ZBH2,
                                             ScheduleKind::ZBV,
                                             ScheduleKind::DualPipeV,
                                             ScheduleKind::Helix};

StageShape stagecraft::pipe::sched::stageShape(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZBH1:
  case ScheduleKind::ZBH2:
    return StageShape::Contiguous;
  case ScheduleKind::Interleaved1F1B:
  case ScheduleKind::Helix:
    return StageShape::Loop;
  case ScheduleKind::ZBV:
  case ScheduleKind::DualPipeV:
    return StageShape::V;
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::ArrayRef<ScheduleKind> stagecraft::pipe::sched::allScheduleKinds() {
  return kAllKinds;
}

llvm::StringRef stagecraft::pipe::sched::scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved1F1B:
    return "interleaved-1f1b";
  case ScheduleKind::ZBH1:
    return "zb-h1";
  case ScheduleKind::ZBH2:
    return "zb-h2";
  case ScheduleKind::ZBV:
    return "zb-v";
  case ScheduleKind::DualPipeV:
    return "dualpipev";
  case ScheduleKind::Helix:
    return "helix";
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::Expected<ScheduleKind>
stagecraft::pipe::sched::parseScheduleKind(llvm::StringRef name) {
  std::string known;
  for (ScheduleKind kind : kAllKinds) {
    if (scheduleKindName(kind) == name)
      return kind;
    known += (known.empty() ? "" : ", ") + scheduleKindName(kind).str();
  }
  // `auto` is a search over these kinds, not one of them (AutoScheduler.h).
  known += ", auto";
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      fmt::format("unknown schedule kind '{}'; expected one of: {}", name.str(),
                  known));
}

static llvm::Expected<Schedule>
generateOnEqualDevices(const Problem &problem, const ScheduleOptions &options);

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateSchedule(const Problem &problem,
                                          const ScheduleOptions &options) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (!problem.hasDevices())
    return generateOnEqualDevices(problem, options);
  // Devices of different speeds: the kind's placement first (speeds aside),
  // then the kind again on the costs that placement's devices see, so that
  // its heuristics (warm-up depths, where W fills bubbles) work on the real
  // durations. The simulator divides by the speeds itself.
  Problem plain = scaledForDevices(problem, {});
  llvm::Expected<Schedule> first = generateOnEqualDevices(plain, options);
  if (!first)
    return first.takeError();
  llvm::Expected<Schedule> second = generateOnEqualDevices(
      scaledForDevices(problem, first->placement), options);
  if (!second || second->placement != first->placement) {
    if (!second)
      llvm::consumeError(second.takeError());
    return first;
  }
  return second;
}

static llvm::Expected<Schedule>
generateOnEqualDevices(const Problem &problem, const ScheduleOptions &options) {
  if (options.kind != ScheduleKind::Helix)
    for (const Stage &s : problem.stages)
      if (s.attention)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("stage @{} has attention(...), a separate task that "
                        "only kind=helix schedules",
                        s.name));
  if (!problem.isChain() && (options.kind == ScheduleKind::Interleaved1F1B ||
                             options.kind == ScheduleKind::ZBV ||
                             options.kind == ScheduleKind::DualPipeV ||
                             options.kind == ScheduleKind::Helix))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("{} is built on a chain of stages, and pipeline @{} "
                    "branches (inputs(...)): its placement walks the stages "
                    "in order, which a graph does not have; use gpipe, "
                    "1f1b, zb-h1, zb-h2 or auto",
                    scheduleKindName(options.kind).str(), problem.name));
  if (options.kind != ScheduleKind::Interleaved1F1B && options.chunks > 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("chunks={} applies to interleaved-1f1b only, not {}",
                    options.chunks, scheduleKindName(options.kind).str()));
  switch (options.kind) {
  case ScheduleKind::GPipe: {
    auto placement = placeContiguous(problem, /*requireContiguous=*/false);
    if (!placement)
      return placement.takeError();
    return generateGPipe(problem, *placement);
  }
  case ScheduleKind::OneFOneB: {
    auto placement = placeContiguous(problem, /*requireContiguous=*/true);
    if (!placement)
      return placement.takeError();
    return generateOneFOneB(problem, *placement);
  }
  case ScheduleKind::Interleaved1F1B:
    return generateInterleaved1F1B(problem, options.chunks);
  case ScheduleKind::ZBH1:
  case ScheduleKind::ZBH2: {
    auto placement = placeContiguous(problem, /*requireContiguous=*/true);
    if (!placement)
      return placement.takeError();
    return options.kind == ScheduleKind::ZBH1
               ? generateZBH1(problem, *placement, options.objective)
               : generateZBH2(problem, *placement, options.objective);
  }
  case ScheduleKind::ZBV:
    return generateZBV(problem, options.objective);
  case ScheduleKind::DualPipeV:
    return generateDualPipeV(problem);
  case ScheduleKind::Helix:
    return generateHelix(problem, options.folds, options.recompute);
  }
  llvm_unreachable("unknown schedule kind");
}
