// RUN: stagecraft-opt %s --pipe-schedule="kind=zb-v" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" --pipe-simulate | FileCheck %s --check-prefix=BASE

// Tests ZB-V on 2 ranks x 4 stages: V placement (rank 0 hosts the first and
// last stage), split backward, peak within 1F1B's highest peak (4) on the
// same model, and a shorter step than 1F1B: 37, the lower bound (rank 1
// starts one forward late, then works 36 without a gap).
// CHECK-LABEL: pipe.schedule @v_zb_v for @v
// CHECK-SAME: makespan = 3.700000e+01 : f64
// CHECK-SAME: peak_memory = array<f64: 4.000000e+00, 4.000000e+00>
// CHECK: pipe.rank 0 stages [@s0, @s3]
// CHECK: pipe.rank 1 stages [@s1, @s2]
// BASE: makespan = 4.200000e+01 : f64
// BASE-SAME: peak_memory = array<f64: 4.000000e+00, 2.000000e+00>
pipe.pipeline @v ranks(2) microbatches(6) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
