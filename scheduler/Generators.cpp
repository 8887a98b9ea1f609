//===- Generators.cpp - Schedule kind dispatch ----------------------------===//
//
// Kind names and the `generateSchedule` entry point.
//
//===----------------------------------------------------------------------===//

#include "scheduler/Generators.h"
#include "scheduler/Helix.h"
#include "scheduler/AutoScheduler.h"
#include "scheduler/Simulator.h"

#include <fmt/format.h>

using namespace stagecraft::pipe::sched;

static constexpr ScheduleKind kAllKinds[] = {
    ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B,
    ScheduleKind::ZBH1,  ScheduleKind::ZBH2,     ScheduleKind::ZBV,
    ScheduleKind::DualPipeV, ScheduleKind::Helix};

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

llvm::Expected<ScheduleKind> stagecraft::pipe::sched::parseScheduleKind(llvm::StringRef name) {
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
      fmt::format("unknown schedule kind '{}'; expected one of: {}",
                  name.str(), known));
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateSchedule(const Problem &problem,
                              const ScheduleOptions &options) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (options.kind != ScheduleKind::Helix)
    for (const Stage &s : problem.stages)
      if (s.attention)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("stage @{} has attention(...), a separate task that "
                        "only kind=helix schedules",
                        s.name));
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
               ? generateZBH1(problem, *placement)
               : generateZBH2(problem, *placement);
  }
  case ScheduleKind::ZBV:
    return generateZBV(problem);
  case ScheduleKind::DualPipeV:
    return generateDualPipeV(problem);
  case ScheduleKind::Helix:
    return generateHelix(problem, options.folds, options.recompute);
  }
  llvm_unreachable("unknown schedule kind");
}

llvm::Expected<KindResult>
stagecraft::pipe::sched::scheduleByName(const Problem &problem,
                                        const KindRequest &request) {
  auto fail = [](std::string message) -> llvm::Expected<KindResult> {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  KindResult result;
  if (request.kind == "auto") {
    if (request.chunks > 1)
      return fail("chunks applies to interleaved-1f1b only; auto chooses "
                  "the placement");
    AutoOptions options;
    options.memoryLimit = request.memoryLimit;
    options.timeLimit = request.timeLimit;
    if (request.progress)
      options.progress = request.progress;
    llvm::Expected<AutoResult> found = autoSchedule(problem, options);
    if (!found)
      return found.takeError();
    result.schedule = std::move(found->schedule);
    result.choice = found->name;
    result.lowerBound = found->lowerBound;
    result.memoryAwareBound = found->memoryAwareBound;
    return result;
  }
  llvm::Expected<ScheduleKind> parsed = parseScheduleKind(request.kind);
  if (!parsed)
    return parsed.takeError();
  ScheduleOptions options;
  options.kind = *parsed;
  options.chunks = request.chunks;
  options.folds = request.folds;
  options.recompute = request.recompute;
  llvm::Expected<Schedule> schedule = generateSchedule(problem, options);
  if (!schedule)
    return schedule.takeError();
  if (request.memoryLimit > 0.0) {
    llvm::Expected<Timeline> t = simulate(problem, *schedule);
    if (!t)
      return t.takeError();
    for (int r = 0; r < problem.ranks; ++r)
      if (t->peakMemory[r] > request.memoryLimit * (1 + 1e-9))
        return fail(fmt::format("its peak memory {} on rank {} exceeds "
                                "memory-limit={}",
                                t->peakMemory[r], r, request.memoryLimit));
  }
  result.schedule = std::move(*schedule);
  return result;
}
