//===- PyTorchCsv.h - torch.distributed.pipelining CSV ----------*- C++ -*-===//
//
// The schedule CSV of PyTorch's `torch.distributed.pipelining`
// (`_dump_csv` / `_load_csv`): one row per rank, one action per cell, written
// `<stage><F|I|W|B><microbatch>` with the global stage index. Empty cells are
// idle steps. Communication cells (`SEND_F`, `RECV_F`, `SEND_B`, `RECV_B`)
// are accepted and skipped on import: the verifier derives communication from
// the dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_PYTORCHCSV_H
#define STAGECRAFT_SCHEDULER_PYTORCHCSV_H

#include "scheduler/Schedule.h"

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
};

/// The CSV of \p schedule, one line per rank. Fails with a ScheduleError at
/// the first overlapped forward+backward action, which PyTorch's CSV has no
/// cell for.
llvm::Expected<std::string> formatPyTorchCsv(const Schedule &schedule);

/// Reads \p text against \p problem. A stage is placed on the rank of the
/// row where it first appears (or its pin); the result is not verified.
/// Fails with a CsvError on a malformed cell, a stage index out of range, or
/// a row count different from the problem's ranks.
llvm::Expected<ImportedSchedule> parsePyTorchCsv(llvm::StringRef text,
                                                 const Problem &problem);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_PYTORCHCSV_H
