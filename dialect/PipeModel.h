//===- PipeModel.h - pipe IR <-> scheduler model ----------------*- C++ -*-===//
//
// The bridge between the `pipe` ops and the MLIR-free scheduler library:
// read a pipeline into a `sched::Problem`, a schedule op into a
// `sched::Schedule` (remembering the op behind every action, for
// diagnostics), build a schedule op from a `sched::Schedule`, and turn a
// `sched::ScheduleError` into a located diagnostic. The op verifiers and the
// passes share it, so both check schedules with the same code.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEMODEL_H
#define STAGECRAFT_DIALECT_PIPEMODEL_H

#include "dialect/PipeOps.h"

#include "scheduler/lower/Program.h"
#include "scheduler/model/DataParallel.h"
#include "scheduler/model/Schedule.h"
#include "scheduler/policy/Policy.h"
#include "scheduler/search/Partition.h"

#include "mlir/IR/Builders.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <vector>

namespace stagecraft::pipe {

/// The problem a verified \p pipeline describes.
/// The layers of a layer pipeline in model order, each `count(N)` as N.
std::vector<sched::Layer> layersFromPipeline(PipelineOp pipeline);

/// Replaces \p pipeline's pipe.layer ops with pipe.stage ops `@s0`, ... cut
/// by \p partition (sums, `layers(N)`, `layer_range`), and, when
/// \p deviceOrder is given, reorders `devices(...)`: rank r gets the device
/// of rank deviceOrder[r].
void replaceLayersWithStages(PipelineOp pipeline,
                             llvm::ArrayRef<sched::Layer> layers,
                             const sched::Partition &partition,
                             llvm::ArrayRef<int> deviceOrder = {});

sched::Problem problemFromPipeline(PipelineOp pipeline);

/// The data parallelism around a verified \p pipeline (nullopt without
/// `data_parallel(...)`): its degree, sharding, link, optimizer time and
/// each stage's `gradient` bytes.
std::optional<sched::DataParallel>
dataParallelFromPipeline(PipelineOp pipeline);

/// Where \p op's gradient reductions are released: `dp_placement` (torch's
/// rule when absent) with `dp_bucket` bytes a bucket.
sched::DataParallelOptions dataParallelOptionsOf(ScheduleOp op);

/// Records \p options on \p op as `dp_placement` and `dp_bucket`.
void setDataParallelOptions(ScheduleOp op,
                            const sched::DataParallelOptions &options);

/// The kind of an action op; nullopt for any other op.
std::optional<sched::ActionKind> getActionKind(mlir::Operation *op);

struct ScheduleModel {
  sched::Problem problem;
  sched::Schedule schedule;
  /// The pipeline's data parallelism, and where the schedule releases its
  /// gradient reductions.
  std::optional<sched::DataParallel> dataParallel;
  sched::DataParallelOptions dataParallelOptions;
  /// actionOps[r][i] is the op of action i of rank r.
  std::vector<std::vector<mlir::Operation *>> actionOps;
  /// rankOps[r] is the `pipe.rank` op of rank r.
  std::vector<RankOp> rankOps;
  /// Set when the schedule spells out its communication: the program, and
  /// the op of each of its instructions.
  std::optional<sched::Program> program;
  std::vector<std::vector<mlir::Operation *>> instructionOps;
};

/// What the sites of a scheduler error index: a rank's actions (schedules)
/// or its instructions (programs).
enum class SiteSpace { Actions, Instructions };

/// Reads \p op against \p pipeline, with its communication ops if any. Fails,
/// with a diagnostic at the op at fault, on a rank out of range, listed twice
/// or missing, an unknown or doubly hosted stage, a stage listed on a rank
/// other than its pin, an action or transfer naming an unknown stage, an
/// empty group, or a peer out of range.
mlir::FailureOr<ScheduleModel> readSchedule(ScheduleOp op, PipelineOp pipeline);

/// Emits \p error (a sched::ScheduleError, or any other error as plain text)
/// at the op of its site, with its notes attached, and returns failure.
mlir::LogicalResult emitScheduleError(ScheduleOp op, const ScheduleModel &model,
                                      llvm::Error error,
                                      SiteSpace space = SiteSpace::Actions);

/// Creates `pipe.schedule @name for @pipeline` with \p schedule's ranks and
/// actions at the builder's insertion point. Action i of rank r gets location
/// \p actionLoc(r, i) when given, else \p loc. An empty \p kind is omitted.
ScheduleOp
buildSchedule(mlir::OpBuilder &builder, mlir::Location loc, PipelineOp pipeline,
              llvm::StringRef name, llvm::StringRef kind,
              const sched::Schedule &schedule,
              llvm::function_ref<mlir::Location(int, int)> actionLoc = nullptr);

/// As `buildSchedule`, with \p program's transfers and groups between the
/// actions; instruction i of rank r gets location \p instrLoc(r, i).
ScheduleOp
buildProgram(mlir::OpBuilder &builder, mlir::Location loc, PipelineOp pipeline,
             llvm::StringRef name, llvm::StringRef kind,
             const sched::Program &program,
             llvm::function_ref<mlir::Location(int, int)> instrLoc = nullptr);

/// The policy \p op holds (its text: `policy NAME`, then statement k on
/// line k + 1).
llvm::Expected<sched::Policy> policyFromOp(PolicyOp op);

/// \p message (about a policy op's text) with each "line N" named as the
/// op's statement N - 1.
std::string describePolicyMessage(llvm::StringRef message);

} // namespace stagecraft::pipe

#endif // STAGECRAFT_DIALECT_PIPEMODEL_H
