//===- PyTorchCsv.h - torch.distributed.pipelining CSV ----------*- C++ -*-===//
//
// The schedule CSV of PyTorch's `torch.distributed.pipelining`
// (`_dump_csv` / `_load_csv`): one row per rank, one action per cell, written
// `<stage><F|I|W|B><microbatch>` with the global stage index. Empty cells are
// idle steps. Communication cells follow PyTorch's `_add_send_recv`:
// `<s>SEND_F<m>` on the rank of stage s and `<s+1>RECV_F<m>` on the next
// stage's rank for an activation, `<s>SEND_B<m>` and `<s-1>RECV_B<m>` for a
// gradient. `REDUCE_GRAD`, `WAIT_REDUCE_GRAD`, `UNSHARD` and `RESHARD`
// (torch's data-parallel cells) are written on request and skipped on
// import. A CSV with them imports as a program (its transfers in the
// written order, then verified like any); one without, as a schedule whose
// communication the compiler derives.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_FORMATS_PYTORCHCSV_H
#define STAGECRAFT_SCHEDULER_FORMATS_PYTORCHCSV_H

#include "scheduler/lower/Program.h"
#include "scheduler/model/Schedule.h"

#include <string>

namespace stagecraft::pipe::sched {

/// Where a cell sits in the CSV text, 1-based.
struct CsvPosition {
  int line = 0;
  int column = 0;
};

class CsvError : public llvm::ErrorInfo<CsvError> {
public:
  static char ID;
  CsvError(CsvPosition position, std::string message)
      : position(position), message(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  CsvPosition position;
  std::string message;
};

struct ImportedSchedule {
  Schedule schedule;
  /// positions[r][i] is where action i of rank r was written.
  std::vector<std::vector<CsvPosition>> positions;
  /// Set when the CSV has communication cells: all its cells in order, and
  /// where instruction i of rank r was written.
  std::optional<Program> program;
  std::vector<std::vector<CsvPosition>> instructionPositions;
};

/// The CSV of \p schedule, one line per rank. Fails with a ScheduleError at
/// the first overlapped forward+backward action, which PyTorch's CSV has no
/// cell for.
llvm::Expected<std::string> formatPyTorchCsv(const Schedule &schedule);

/// The data-parallel cells of torch's runtime a CSV may carry: each
/// stage's `REDUCE_GRAD` right after its last gradient action (W, B, or
/// the backward of an F&B) on its rank, with the matching
/// `WAIT_REDUCE_GRAD` deferred to before the rank's next `REDUCE_GRAD` or
/// the end of its row (one reduction pending at a time, the rest of the
/// step overlapping it); sharded, also each stage's `UNSHARD` at the start
/// of its rank's row, in the order of first use, and its `RESHARD` after
/// its reduction's wait.
struct TorchGradientCells {
  bool sharded = false;
};

/// As above with \p program's transfers as communication cells (a group's
/// transfers one after another, as PyTorch's CSV has no groups), and with
/// \p gradients' cells when given.
llvm::Expected<std::string>
formatPyTorchCsv(const Program &program,
                 const TorchGradientCells *gradients = nullptr);

/// How torch's runtime can run \p schedule's recomputation: the stages
/// whose every forward recomputes in full (run their modules under
/// torch.utils.checkpoint). Fails, naming the stage, where torch cannot: a
/// stage that recomputes some microbatches and keeps the others (torch runs
/// one module for every microbatch), or selective recomputation.
llvm::Expected<std::vector<int>>
torchCheckpointStages(const Problem &problem, const Schedule &schedule);

/// Reads \p text against \p problem. A stage is placed on the rank of the
/// row where it first appears (or its pin); the result is not verified.
/// Fails with a CsvError on a malformed cell, a stage index out of range, or
/// a row count different from the problem's ranks.
llvm::Expected<ImportedSchedule> parsePyTorchCsv(llvm::StringRef text,
                                                 const Problem &problem);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_FORMATS_PYTORCHCSV_H
