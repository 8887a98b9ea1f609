// RUN: stagecraft-opt %s --pipe-schedule="kind=auto objective=span memory-limit=8 time-limit=1" | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=auto objective=span memory-limit=8 time-limit=1" | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SPAN
// RUN: stagecraft-opt %s --pipe-schedule="kind=auto memory-limit=8 time-limit=1" | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=MAKESPAN
// RUN: stagecraft-opt %s --pipe-schedule="kind=zb-h2 objective=span" | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=ZB
// RUN: stagecraft-opt %s --pipe-schedule="kind=auto objective=span memory-limit=8 time-limit=1" | stagecraft-translate --pipe-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-plan | FileCheck %s --check-prefix=PLAN1F1B
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto objective=throughput" 2>&1 | FileCheck %s --check-prefix=BAD

// Tests the span objective: with twice 1F1B's memory (8: rank 0 peaks at 4
// under 1F1B), auto minimizing the largest per-rank span fills every rank's
// span with its own work (8 microbatches x 3 = 24, the span bound), where
// the makespan objective's best (makespan 27, its bound) leaves the span at
// 27. The
// schedule records the objective and the span bound; the zero-bubble kinds
// choose their candidate by it; a bad name is refused (kind=exact with the
// span objective: pipe-schedule-ilp.mlir).
// CHECK: pipe.schedule @demo_auto
// CHECK-SAME: objective = "span"
// CHECK-SAME: span_bound = 2.400000e+01
// SPAN: span 24 (largest per-rank span
// MAKESPAN: makespan 27,
// MAKESPAN: span 27 (largest per-rank span
// ZB: schedule @demo_zb_h2
// The plan file carries the objective and both simulated figures, so a
// runtime knows whether the plan expects steps to overlap.
// PLAN: "objective":"span"
// PLAN: "simulated_makespan":{{[0-9.]+}},"simulated_span":24
// PLAN1F1B: "objective":"makespan"
// PLAN1F1B: "simulated_makespan":33,"simulated_span":33
// BAD: error: pipe-schedule: unknown objective 'throughput'; expected makespan or span
pipe.pipeline @demo ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
