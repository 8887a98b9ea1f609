//===- FuzzSpec.cpp - Fuzz target: DSL parser, verifier, every kind -------===//
//
// An input is `pipe` IR text. It goes through the same path as a user's
// file (nesting check, MLIR parser, op verifiers); every pipeline that
// parses is scheduled with every kind, `auto` and each `pipe.policy` of the
// module (small problems only, so that an execution stays fast), verified,
// simulated, lowered to communication and to a plan; the module then runs the
// verify, insert-comm, plan-buffers and simulate passes. Errors are expected;
// crashes, hangs and sanitizer reports are what the fuzzer looks for.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeDialect.h"
#include "dialect/PipeModel.h"
#include "dialect/PipeOps.h"
#include "dialect/PipeParse.h"
#include "passes/Passes.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Policy.h"
#include "scheduler/search/AutoScheduler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace stagecraft::pipe;

/// A schedule that came out (kind or policy) must verify, lower to a
/// program that verifies, and build a plan; an error is fine.
static void checkLowered(const sched::Problem &problem,
                         llvm::Expected<sched::Schedule> s) {
  if (!s) {
    llvm::consumeError(s.takeError());
    return;
  }
  if (llvm::Error err = sched::verifySchedule(problem, *s))
    llvm::report_fatal_error(llvm::Twine("a generated schedule does not "
                                         "verify: ") +
                             llvm::toString(std::move(err)));
  sched::Program program = sched::lowerCommunication(problem, *s);
  if (llvm::Error err = sched::verifyProgram(problem, program))
    llvm::report_fatal_error(llvm::Twine("a lowered schedule does not "
                                         "verify: ") +
                             llvm::toString(std::move(err)));
  (void)sched::buildPlan(problem, program, "fuzz", 64);
}

// `problem` must be valid (sched::validateProblem).
static void scheduleEveryKind(const sched::Problem &problem) {
  for (sched::ScheduleKind kind :
       {sched::ScheduleKind::GPipe, sched::ScheduleKind::OneFOneB,
        sched::ScheduleKind::Interleaved1F1B, sched::ScheduleKind::ZBH1,
        sched::ScheduleKind::ZBH2, sched::ScheduleKind::ZBV,
        sched::ScheduleKind::DualPipeV, sched::ScheduleKind::Helix}) {
    checkLowered(problem, sched::generateSchedule(problem, {kind}));
  }
  sched::AutoOptions options;
  options.timeLimit = 0.05;
  options.maxLocalSteps = 50;
  llvm::Expected<sched::AutoResult> a = sched::autoSchedule(problem, options);
  if (!a)
    llvm::consumeError(a.takeError());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<PipeDialect>();
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parsePipeSource(sourceMgr, &context);
  if (!module)
    return 0;
  for (PipelineOp pipeline : module->getOps<PipelineOp>()) {
    sched::Problem problem = problemFromPipeline(pipeline);
    // Small problems only: an execution should take milliseconds.
    if (3LL * problem.numStages() * problem.microbatches > 3000 ||
        problem.ranks > 64)
      return 0;
    if (llvm::Error invalid = sched::validateProblem(problem)) {
      llvm::consumeError(std::move(invalid));
      continue;
    }
    scheduleEveryKind(problem);
    // Each `pipe.policy` of the module, converted from its op and
    // instantiated on the pipeline with its default parameters.
    for (PolicyOp policyOp : module->getOps<PolicyOp>()) {
      llvm::Expected<sched::Policy> policy = policyFromOp(policyOp);
      if (!policy) {
        llvm::consumeError(policy.takeError());
        continue;
      }
      checkLowered(problem, sched::instantiatePolicy(*policy, problem));
    }
  }
  PassManager pm(&context);
  pm.addPass(createPipeVerifySchedulePass());
  pm.addPass(createPipeInsertCommPass());
  pm.addPass(createPipePlanBuffersPass());
  pm.addPass(createPipeSimulatePass());
  (void)pm.run(*module);
  return 0;
}
