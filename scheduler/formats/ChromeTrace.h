//===- ChromeTrace.h - Chrome trace / Perfetto JSON -------------*- C++ -*-===//
//
// Writes timelines in the Chrome trace event format, which Perfetto and
// chrome://tracing open. Each timeline becomes one process with one track
// (thread) per rank, so a simulated and a measured timeline of the same
// schedule can be laid side by side in one file. With contended links
// (`links(...)`), a track per directed link follows the ranks, showing the
// time each transfer held it. Inside data parallelism, a track per rank
// shows its collectives.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_FORMATS_CHROMETRACE_H
#define STAGECRAFT_SCHEDULER_FORMATS_CHROMETRACE_H

#include "scheduler/model/DataParallel.h"
#include "scheduler/model/Simulator.h"

#include "llvm/Support/JSON.h"

namespace stagecraft::pipe::sched {

class ChromeTraceWriter {
public:
  /// \p microsPerUnit converts schedule time units into trace microseconds.
  explicit ChromeTraceWriter(double microsPerUnit = 1000.0)
      : microsPerUnit(microsPerUnit) {}

  /// Adds \p timeline as a process named \p name ("simulated", "measured").
  /// With \p dataParallel, the pipeline's compute is drawn delayed by its
  /// shift, each rank's optimizer step follows on its track, and a track
  /// per rank after those shows its data-parallel collectives (weight
  /// gathers, gradient reductions and their buckets).
  void addTimeline(llvm::StringRef name, const Problem &problem,
                   const Timeline &timeline,
                   const DataParallelTimeline *dataParallel = nullptr);

  /// The whole trace as a JSON document.
  std::string str() const;

private:
  double microsPerUnit;
  int nextPid = 0;
  /// json::Value keeps StringRefs unowned: every string put here is owned.
  llvm::json::Array events;
};

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_FORMATS_CHROMETRACE_H
