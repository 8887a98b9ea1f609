//===- InsertComm.cpp - --pipe-insert-comm --------------------------------===//
//
// Replaces each schedule without transfers by the same schedule with its
// communication lowered by the scheduler library (sched::lowerCommunication).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPEINSERTCOMMPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct InsertCommPass
    : public stagecraft::pipe::impl::PipeInsertCommPassBase<InsertCommPass> {
  void runOnOperation() override {
    auto insert = [](ScheduleOp op, const ScheduleModel &model) {
      if (model.program)
        return success(); // already explicit
      FailureOr<sched::Program> program = programOf(op, model);
      if (failed(program))
        return failure();
      OpBuilder builder(op);
      PipelineOp pipeline = SymbolTable::lookupNearestSymbolFrom<PipelineOp>(
          op, op.getPipelineAttr());
      ScheduleOp lowered = buildProgram(builder, op.getLoc(), pipeline,
                                        op.getSymName(), "", *program);
      lowered->setAttrs(op->getAttrs());
      op.erase();
      return success();
    };
    if (failed(forEachSchedule(getOperation(), insert)))
      signalPassFailure();
  }
};
} // namespace
