//===- VerifyPolicy.cpp - --pipe-verify-policy ----------------------------===//
//
// Verifies each pipe.policy over a family of pipelines with the scheduler's
// family verifier (scheduler/policy): a remark at the policy when it holds
// on every point, an error naming the first failing point otherwise.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/PipeModel.h"

#include "scheduler/policy/Policy.h"

#include <fmt/format.h>

#include <limits>

#include "mlir/IR/SymbolTable.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPEVERIFYPOLICYPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {

/// "LO..HI" or "N" as an inclusive range with 1 <= LO <= HI.
std::optional<std::pair<int, int>> parseRange(StringRef text) {
  auto [lo, hi] = text.trim().split("..");
  int a = 0, b = 0;
  if (lo.trim().getAsInteger(10, a))
    return std::nullopt;
  b = a;
  if (text.contains("..") && hi.trim().getAsInteger(10, b))
    return std::nullopt;
  if (a < 1 || a > b)
    return std::nullopt;
  return std::make_pair(a, b);
}

struct VerifyPolicyPass
    : public stagecraft::pipe::impl::PipeVerifyPolicyPassBase<
          VerifyPolicyPass> {
  using PipeVerifyPolicyPassBase::PipeVerifyPolicyPassBase;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(
            PipeVerifyPolicyPassBase::initializeOptions(options, errorHandler)))
      return failure();
    for (auto [name, value] :
         {std::pair<const char *, std::string>{"ranks", ranks},
          {"microbatches", microbatches},
          {"chunks", chunks}})
      if (!parseRange(value))
        return errorHandler(fmt::format(
            "pipe-verify-policy: {}={} is not LO..HI (or N) with 1 <= LO "
            "<= HI",
            name, value));
    if (llvm::Expected<sched::PolicyParams> p =
            sched::parsePolicyParams(params);
        !p)
      return errorHandler("pipe-verify-policy: " +
                          llvm::toString(p.takeError()));
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    sched::PolicyFamily family;
    std::tie(family.ranksLo, family.ranksHi) = *parseRange(ranks);
    std::tie(family.microbatchesLo, family.microbatchesHi) =
        *parseRange(microbatches);
    std::tie(family.chunksLo, family.chunksHi) = *parseRange(chunks);
    if (!pipeline.empty()) {
      StringRef name = StringRef(pipeline.getValue()).ltrim('@');
      PipelineOp op = symbols.lookup<PipelineOp>(name);
      if (!op || op.isLayerPipeline()) {
        module.emitError() << "pipe-verify-policy: pipeline=@" << name
                           << (op ? " holds layers; cut it into stages first"
                                  : ": the module has no such pipe.pipeline");
        return signalPassFailure();
      }
      sched::Problem problem = problemFromPipeline(op);
      family.stage = problem.stages.front();
      family.latency = problem.latency;
    }
    sched::PolicyParams values =
        llvm::cantFail(sched::parsePolicyParams(params));
    SmallVector<PolicyOp> policies;
    if (!policy.empty()) {
      StringRef name = StringRef(policy.getValue()).ltrim('@');
      PolicyOp op = symbols.lookup<PolicyOp>(name);
      if (!op) {
        module.emitError() << "pipe-verify-policy: policy=@" << name
                           << ": the module has no such pipe.policy";
        return signalPassFailure();
      }
      policies.push_back(op);
    } else {
      llvm::append_range(policies, module.getOps<PolicyOp>());
      if (policies.empty()) {
        module.emitError() << "pipe-verify-policy: the module has no "
                              "pipe.policy";
        return signalPassFailure();
      }
    }
    for (PolicyOp op : policies) {
      llvm::Expected<sched::Policy> parsed = policyFromOp(op);
      if (!parsed) {
        op.emitError() << describePolicyMessage(
            llvm::toString(parsed.takeError()));
        return signalPassFailure();
      }
      llvm::Expected<sched::PolicyFamilyReport> report =
          sched::verifyPolicyFamily(*parsed, family, values);
      if (!report) {
        op.emitError() << describePolicyMessage(
            llvm::toString(report.takeError()));
        return signalPassFailure();
      }
      op.emitRemark() << fmt::format(
          "policy @{} holds on {} points of ranks={}..{} microbatches={}..{} "
          "chunks={}..{} ({} outside its requires, skipped)",
          op.getSymName().str(), report->held, family.ranksLo, family.ranksHi,
          family.microbatchesLo, family.microbatchesHi, family.chunksLo,
          family.chunksHi, report->skipped);
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
