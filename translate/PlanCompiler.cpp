//===- PlanCompiler.cpp - From pipe IR to a runtime plan ------------------===//
//
// See PlanCompiler.h.
//
//===----------------------------------------------------------------------===//

#include "translate/PlanCompiler.h"

#include "dialect/PipeDialect.h"
#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

#include "scheduler/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace stagecraft::pipe;

llvm::Expected<sched::Plan>
stagecraft::pipe::compileSpecFile(llvm::StringRef path,
                                  const CompileOptions &options) {
  auto fail = [&](const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path.str() + ": " + what);
  };
  MLIRContext context;
  context.loadDialect<PipeDialect>();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(path, sourceMgr,
                                                           &context);
  if (!module)
    return fail("cannot parse the spec");
  if (!options.kind.empty()) {
    PassManager pm(&context);
    PipeSchedulePassOptions pass;
    pass.kind = options.kind;
    pass.chunks = options.chunks;
    pass.memoryLimit = options.memoryLimit;
    pass.timeLimit = options.timeLimit;
    pm.addPass(createPipeSchedulePass(pass));
    if (failed(pm.run(*module)))
      return fail("cannot schedule it as " + options.kind);
  }
  std::optional<sched::Plan> plan;
  int found = 0;
  LogicalResult result = forEachSchedule(
      *module, [&](ScheduleOp op, const ScheduleModel &model) -> LogicalResult {
        // A freshly scheduled spec: the schedule just added for its kind.
        bool wanted = options.scheduleName.empty()
                          ? (options.kind.empty() ||
                             op.getKind() == llvm::StringRef(options.kind))
                          : op.getSymName() == options.scheduleName;
        if (!wanted)
          return success();
        if (++found > 1)
          return op.emitError() << "several pipe.schedule ops match; choose one "
                                   "with --schedule-name";
        FailureOr<sched::Plan> p = planFromSchedule(
            op, model, options.unitBytes, nullptr, options.minMessageBytes);
        if (failed(p))
          return failure();
        plan = std::move(*p);
        return success();
      });
  if (failed(result))
    return fail("cannot build a plan");
  if (!plan)
    return fail(options.kind.empty()
                    ? "holds no pipe.schedule; pass --schedule=KIND"
                    : "no schedule was produced");
  return std::move(*plan);
}
