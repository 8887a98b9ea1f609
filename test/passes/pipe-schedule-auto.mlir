// RUN: stagecraft-opt %s --pipe-schedule="kind=auto" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=auto memory-limit=2.0" --pipe-simulate | FileCheck %s --check-prefix=TIGHT
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto memory-limit=0.5" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not stagecraft-opt %s --pipe-schedule="kind=gpipe memory-limit=2.0" 2>&1 | FileCheck %s --check-prefix=FIXED
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS

// Tests auto on an embedding-heavy first and head-heavy last stage at the
// default budget (1F1B's highest peak, 4): it records its choice and the
// lower bound, which it reaches here.
// CHECK-LABEL: pipe.schedule @hetero_auto for @hetero
// CHECK-SAME: auto_choice = "
// CHECK-SAME: kind = "auto"
// CHECK-SAME: lower_bound = [[BOUND:[0-9.e+]+]] : f64
// CHECK-SAME: makespan = [[BOUND]] : f64
// Tests that a tighter limit holds on every rank.
// TIGHT: peak_memory = array<f64: 2.000000e+00, 2.000000e+00, 2.000000e+00, 2.000000e+00>
// NONE: error: cannot schedule pipeline @hetero as auto: memory-limit=0.5 is below 1, what one microbatch needs on the busiest rank of any placement
// FIXED: error: cannot schedule pipeline @hetero as gpipe: its peak memory 4 on rank 0 exceeds memory-limit=2
// CHUNKS: error: cannot schedule pipeline @hetero as auto: chunks applies to interleaved-1f1b only; auto chooses the placement
pipe.pipeline @hetero ranks(4) microbatches(4) latency(0.1) {
  pipe.stage @embed cost(forward = 1.3, backward_input = 1.43, backward_weight = 1.17)
  pipe.stage @mid0 cost(forward = 1.0, backward_input = 1.1, backward_weight = 0.9)
  pipe.stage @mid1 cost(forward = 1.0, backward_input = 1.1, backward_weight = 0.9)
  pipe.stage @head cost(forward = 1.6, backward_input = 1.76, backward_weight = 1.44)
}
