//===- ScheduleError.cpp - Located scheduling errors ----------------------===//
//
// Text form of a ScheduleError, used by the CLI tools and unit tests.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/ScheduleError.h"

#include "llvm/Support/raw_ostream.h"

using namespace stagecraft::pipe::sched;

char ScheduleError::ID = 0;

void ScheduleError::log(llvm::raw_ostream &os) const {
  os << message;
  for (const ScheduleNote &note : notes)
    os << "\n  " << note.message;
}
