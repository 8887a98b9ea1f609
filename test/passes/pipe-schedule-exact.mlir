// RUN: stagecraft-opt %s --pipe-schedule="kind=exact" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=auto" --pipe-simulate | FileCheck %s --check-prefix=AUTO
// RUN: stagecraft-opt %S/Inputs/exact-latency.mlir --pipe-schedule="kind=exact" --pipe-simulate | FileCheck %s --check-prefix=BOUND
// RUN: stagecraft-opt %S/Inputs/exact-open.mlir --pipe-schedule="kind=exact time-limit=0.4" --pipe-simulate | FileCheck %s --check-prefix=OPEN
// RUN: not stagecraft-opt %S/Inputs/diamond.mlir --pipe-schedule="kind=exact" 2>&1 | FileCheck %s --check-prefix=GRAPH
// RUN: not stagecraft-opt %s --pipe-schedule="kind=exact chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=exact recompute=full" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE
// RUN: sed 's/microbatches(8)/microbatches(200)/' %S/Inputs/exact-latency.mlir | not stagecraft-opt --pipe-schedule="kind=exact" 2>&1 | FileCheck %s --check-prefix=BIG

// Tests kind=exact: on 3 ranks, 3 microbatches and 6 stages with the
// zero-bubble paper's costs, the branch-and-bound proves 17.078 optimal over
// every placement auto searches at 1F1B's peak (the memory-aware bound is
// 17.031, so the bound alone does not prove it), and says so.
// CHECK-LABEL: pipe.schedule @zb_exact for @zb
// CHECK-SAME: auto_choice = "optimal over auto's 3 placements
// CHECK-SAME: kind = "exact"
// CHECK-SAME: makespan = 1.707800e+01 : f64
// CHECK-SAME: memory_aware_bound = 1.703100e+01 : f64
//
// auto runs the same search on problems this small and reaches it too.
// AUTO: auto_choice = "exact search on v (optimal there)"
// AUTO-SAME: makespan = 1.707800e+01 : f64
//
// With latency 0.1 on 4 ranks x 8 microbatches, zb-v's 26.4 meets the
// memory-aware bound (its warm-up part: until its first I, rank 3 can only
// run the forwards that fit in memory together), so it is proven optimal
// without a search.
// BOUND: auto_choice = "optimal over auto's 3 placements (zb-v; 0 nodes)"
// BOUND-SAME: makespan = 2.640000e+01 : f64, memory_aware_bound = 2.640000e+01 : f64
//
// Where the time runs out, it says that the schedule is only the best found.
// OPEN: auto_choice = "not proven optimal within the time limit ({{[0-9]}} of 3 placements proven); best found:
//
// GRAPH: error: cannot schedule pipeline @diamond as exact: the exact search handles a chain of stages only
// CHUNKS: error: cannot schedule pipeline @zb as exact: chunks applies to interleaved-1f1b only; the exact search covers auto's placements
// BIG: error: cannot schedule pipeline @lat as exact: the exact search is for small problems: 4800 actions (8 stages x 200 microbatches x 3), at most 4096; use kind=auto
// RECOMPUTE: error: cannot schedule pipeline @zb as exact: the exact search does not plan recomputation; use kind=auto with recompute=
pipe.pipeline @zb ranks(3) microbatches(3) latency(0.0324) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s4 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s5 cost(forward = 1.0, backward_input = 0.9765, backward_weight = 0.5041) memory(activation = 0.5, weight_grad = 0.25)
}
