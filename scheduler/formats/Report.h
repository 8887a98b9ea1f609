//===- Report.h - Human-readable schedule reports ---------------*- C++ -*-===//
//
// Text a person reads: a summary table (makespan, bubble ratio, busy time and
// peak memory per rank) and an ASCII timeline with one row per rank.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_FORMATS_REPORT_H
#define STAGECRAFT_SCHEDULER_FORMATS_REPORT_H

#include "scheduler/model/DataParallel.h"
#include "scheduler/model/Simulator.h"

#include <string>

namespace stagecraft::pipe::sched {

/// The timeline of \p timeline (simulated from \p schedule) in at most
/// \p width columns per rank. Each action is drawn as its letter and
/// microbatch ("F3", "B12") padded to its duration when the scale leaves
/// room, and as its letter alone otherwise (a note then counts those and
/// names the width that shows them all); on ranks with several stages the
/// 2nd, 4th, ... stage's letters are lowercase; idle time is '.'. A legend
/// line explains every letter drawn.
std::string renderAsciiTimeline(const Schedule &schedule,
                                const Timeline &timeline, int width = 100);

/// The smallest --timeline-width at which every action of \p timeline is
/// drawn with its microbatch number.
int timelineWidthForLabels(const Timeline &timeline);

/// A summary of \p schedule named \p scheduleName: problem size, makespan,
/// bubble ratio, per-rank stages, busy time and peak memory, then the ASCII
/// timeline.
std::string formatSummary(const Problem &problem, const Schedule &schedule,
                          const Timeline &timeline,
                          llvm::StringRef scheduleName, int width = 100);

/// The data-parallel part of a summary: the degree, sharding and
/// placement, the step with its collectives against \p bound, and per rank
/// its collectives' time, the time they expose, its optimizer step and the
/// weight and gradient bytes it holds.
std::string formatDataParallelSummary(const DataParallel &dp,
                                      const DataParallelOptions &options,
                                      const DataParallelTimeline &step,
                                      double bound);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_FORMATS_REPORT_H
