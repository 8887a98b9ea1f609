//===- ScheduleError.h - Located scheduling errors --------------*- C++ -*-===//
//
// The error every scheduler entry point returns when a schedule is wrong. It
// carries an optional primary site (a rank and the index of an action in that
// rank's order) and notes with sites of their own, so that the passes can turn
// it into an MLIR diagnostic at the offending op and the CLI tools into text.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_SCHEDULEERROR_H
#define STAGECRAFT_SCHEDULER_MODEL_SCHEDULEERROR_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// A place in a schedule: action \p index in the order of rank \p rank.
/// rank = -1 means the schedule as a whole; index = -1 the rank as a whole.
struct ScheduleSite {
  int rank = -1;
  int index = -1;
};

struct ScheduleNote {
  ScheduleSite site;
  std::string message;
};

class ScheduleError : public llvm::ErrorInfo<ScheduleError> {
public:
  static char ID;

  ScheduleError(std::string message, ScheduleSite site = {},
                std::vector<ScheduleNote> notes = {})
      : message(std::move(message)), site(site), notes(std::move(notes)) {}

  /// The message, then one indented line per note.
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  std::string message;
  ScheduleSite site;
  std::vector<ScheduleNote> notes;
};

/// Shorthand for `llvm::make_error<ScheduleError>(...)`.
inline llvm::Error scheduleError(std::string message, ScheduleSite site = {},
                                 std::vector<ScheduleNote> notes = {}) {
  return llvm::make_error<ScheduleError>(std::move(message), site,
                                         std::move(notes));
}

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_SCHEDULEERROR_H
