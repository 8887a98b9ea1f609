//===- Calibrate.h - Costs fitted to a measured run --------------*- C++
//-*-===//
//
// What a traced run says about the costs the simulator should use: each
// stage's F, I, W (and fused B) as measured in the run itself (medians over
// the microbatches and steps after the first), the time a message takes
// between ranks (link latency, from receivers that waited for it), and the
// time each rank spends per compute outside computes and waits (per-action
// overhead, folded into the costs). `stagecraft-run --calibrate=FILE` writes
// the spec with these costs, so that scheduling from it predicts the run.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_CALIBRATE_H
#define STAGECRAFT_RUNTIME_CALIBRATE_H

#include "runtime/Runtime.h"
#include "scheduler/model/CostFit.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stagecraft::runtime {

/// The fitted costs (scheduler/model/CostFit.h): per stage F, I, W and
/// fused B with the rank's overhead added, the link latency, per rank the
/// overhead per compute, the steps used.
using Calibration = pipe::sched::CostFit;

/// Fits \p plan's costs to \p report (a run of \p plan with `--train` or
/// timed computes; `RankResult::actions` of every rank), stretched so that
/// its steps replay to their time barrier to barrier; not stretched when
/// \p stepsOverlap (no barrier between them: a step waits on its
/// neighbours, which a replay of the step alone does not). Fails naming
/// the stage when a stage has no measured action.
llvm::Expected<Calibration> calibrate(const sched::Plan &plan,
                                      const RunReport &report,
                                      bool stepsOverlap = false);

/// One line per stage and the fitted latency, for the run's output.
std::string describeCalibration(const sched::Plan &plan,
                                const Calibration &calibration);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_CALIBRATE_H
