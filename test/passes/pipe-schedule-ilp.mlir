// REQUIRES: ilp
// RUN: stagecraft-opt %s --pipe-schedule="kind=ilp time-limit=4" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=ilp time-limit=4 objective=span memory-limit=6" --pipe-simulate | FileCheck %s --check-prefix=SPAN
// RUN: stagecraft-opt %S/pipe-schedule-objective.mlir --pipe-schedule="kind=exact objective=span memory-limit=8 time-limit=4" | FileCheck %s --check-prefix=EXACT
// RUN: stagecraft-opt %S/Inputs/ilp-open.mlir --pipe-schedule="kind=ilp time-limit=0.4" --pipe-verify-schedule | FileCheck %s --check-prefix=OPEN
// RUN: not stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule="kind=ilp" 2>&1 | FileCheck %s --check-prefix=GRAPH
// RUN: not stagecraft-opt %s --pipe-schedule="kind=ilp chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=ilp recompute=full" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
// RUN: sed 's/latency(0.1)/latency(0.1) capacity(9)/' %s | not stagecraft-opt --pipe-schedule="kind=ilp" 2>&1 | FileCheck %s --check-prefix=CAPACITY

// Tests kind=ilp: auto's schedule on 3 ranks x 4 microbatches with heavier
// end stages is the solver's start, and the solver proves it optimal on its
// placement at 1F1B's peak (the program: 156 order variables, one per pair
// of actions on a rank that no dependency orders).
// CHECK-LABEL: pipe.schedule @heavy_ilp for @heavy
// CHECK-SAME: auto_choice = "ilp: makespan 27 optimal on auto's placement (auto's zb-h1 kept; 156 order variables)"
// CHECK-SAME: kind = "ilp"
// CHECK-SAME: makespan = 27.0000
//
// The span objective, at twice that memory.
// SPAN: auto_choice = "ilp: span 27 optimal on auto's placement
//
// kind=exact with the span objective solves the ILP on each of auto's
// placements: on the demo pipeline at twice 1F1B's memory, span 24 (every
// rank's own work) proven.
// EXACT: auto_choice = "span optimal over auto's 1 placements (zb-h2; by the ILP)"
// EXACT-SAME: kind = "exact"
// EXACT-SAME: objective = "span"
// EXACT-SAME: span_bound = 2.400000e+01
//
// Where the time runs out, the solver's bound says how far it may be from
// optimal (here the memory-aware bound).
// OPEN: auto_choice = "ilp: makespan {{[0-9.]+}}, solver bound 29.83 on auto's placement, not proven within the time limit (auto's {{.*}}; 666 order variables)"
//
// GRAPH: error: cannot schedule pipeline @diamond as ilp: the ILP handles a chain of stages only
// CHUNKS: error: cannot schedule pipeline @heavy as ilp: chunks applies to interleaved-1f1b only; the ILP solves on auto's placement
// RECOMPUTE: error: cannot schedule pipeline @heavy as ilp: the ILP does not plan recomputation; use kind=auto with recompute=
// CAPACITY: error: cannot schedule pipeline @heavy as ilp: the ILP does not plan recomputation under a capacity; use kind=auto
pipe.pipeline @heavy ranks(3) microbatches(4) latency(0.1) {
  pipe.stage @s0 cost(forward = 1.3, backward_input = 2.6, backward_weight = 0.5) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.5) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s2 cost(forward = 1.6, backward_input = 3.2, backward_weight = 0.5) memory(activation = 1.0, weight_grad = 0.5)
}
