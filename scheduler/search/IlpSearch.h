//===- IlpSearch.h - Schedules as a mixed-integer program -------*- C++ -*-===//
//
// The Zero Bubble paper's ILP (Qi et al., 2023, section 3.2) over one
// placement: a start time per F, I and W, an order variable per pair of
// actions that share a rank and that no dependency already orders (the
// later one starts after the earlier one ends), the dependencies with their
// latency, and each rank's activation memory at the start of each action
// that allocates, summed over the actions ordered before it, within the
// limit. The objective is the makespan or the largest per-rank span. The
// solver is COIN-OR CBC, started from a given schedule; the per-rank orders
// of its best solution are re-simulated, and the solver's own lower bound
// says how far from optimal that is. Built only where CBC is found
// (`ilpAvailable`).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_ILPSEARCH_H
#define STAGECRAFT_SCHEDULER_SEARCH_ILPSEARCH_H

#include "scheduler/model/Simulator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// Whether this build has the ILP solver (CBC).
bool ilpAvailable();

struct IlpOptions {
  /// Per-rank limit on activation memory; empty: none.
  std::vector<double> memoryLimit;
  /// Seconds the solver may take.
  double timeLimit = 10.0;
  Objective objective = Objective::Makespan;
  /// The solver's first solution; ignored unless it is on the placement and
  /// fits the limits. With the makespan objective its makespan also bounds
  /// the horizon.
  std::optional<Schedule> initial;
};

/// The largest program the ILP builds and solves, in order variables.
constexpr long long kIlpMaxOrderVariables = 20000;

struct IlpResult {
  /// The best schedule found (the solver's orders, re-simulated, or
  /// `initial` where that is no worse).
  Schedule schedule;
  /// The objective's value on `schedule`'s simulated timeline.
  double value = std::numeric_limits<double>::infinity();
  /// The solver's lower bound on the objective over every schedule on the
  /// placement within the limits.
  double bound = 0.0;
  /// `value` is at `bound`: no schedule on the placement does better.
  bool optimal = false;
  /// The solution came from the solver, not from `initial`.
  bool improved = false;
  /// False when the program was too large to solve (more than
  /// kIlpMaxOrderVariables): `initial` stands, with the memory-aware bound.
  bool solved = true;
  /// The program's size.
  int orderVariables = 0;
};

/// Solves \p problem's program on \p placement. Fails if the problem is
/// invalid or outside what the program models (a chain of stages with F, I
/// and W, microbatches of one length, a plain latency, no runtime
/// overheads, recomputation or capacity), if this build has no solver, or if
/// no schedule fits the limits.
llvm::Expected<IlpResult> ilpSchedule(const Problem &problem,
                                      llvm::ArrayRef<int> placement,
                                      const IlpOptions &options);

/// `kind=ilp`: auto for a quarter of \p timeLimit (its memory limit: \p
/// memoryLimit, <= 0 for 1F1B's highest peak; its objective), then the
/// program on auto's placement started from auto's schedule for the rest.
struct IlpOverAuto {
  Schedule schedule;
  double value = 0.0;
  double bound = 0.0;
  bool optimal = false;
  /// auto's own schedule and value, and its candidate's name.
  std::string autoName;
  double autoValue = 0.0;
  bool improved = false;
  bool solved = true;
  /// auto's memory-aware bound at the memory limit.
  double memoryAwareBound = 0.0;
  int orderVariables = 0;
};

llvm::Expected<IlpOverAuto> ilpOverAuto(const Problem &problem,
                                        double memoryLimit, double timeLimit,
                                        Objective objective);

/// `kind=exact objective=span`: the program on every placement auto
/// searches, in order of their span bound, each started from auto's
/// schedule where that is on it, each given an equal share of the time
/// left after auto's quarter; a placement whose bound is no lower than the
/// best found is settled without solving.
struct IlpOverPlacements {
  Schedule schedule;
  double value = 0.0;
  /// The smallest bound over the placements: no schedule does better.
  double bound = 0.0;
  bool optimal = false;
  std::string found;
  int placementsProven = 0, placements = 0;
};

llvm::Expected<IlpOverPlacements> ilpOverPlacements(const Problem &problem,
                                                    double memoryLimit,
                                                    double timeLimit,
                                                    Objective objective);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_ILPSEARCH_H
