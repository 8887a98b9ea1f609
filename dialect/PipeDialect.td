//===- PipeDialect.td - The pipe dialect -------------------*- tablegen -*-===//
//
// The `pipe` dialect describes pipeline-parallel training: a pipeline spec
// (stages, costs, memory, ranks, microbatches) and schedules over it.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEDIALECT_TD
#define STAGECRAFT_DIALECT_PIPEDIALECT_TD

include "mlir/IR/OpBase.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let cppNamespace = "::stagecraft::pipe";
  let summary = "Pipeline-parallel training specs and schedules";
  let description = [{
    A `pipe.pipeline` states the problem: a chain of `pipe.stage`s with the
    cost of their forward (F), backward-for-inputs (I) and backward-for-weights
    (W) actions and their activation memory, on a number of ranks, for a
    number of microbatches. A `pipe.schedule` states a solution: for every
    rank, the stages it hosts and the order of its actions. Passes generate,
    verify and simulate schedules; hand-written ones are checked the same way.
  }];
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

#endif // STAGECRAFT_DIALECT_PIPEDIALECT_TD
