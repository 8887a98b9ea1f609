// RUN: stagecraft-opt %s --pipe-schedule="kind=dualpipev" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=dualpipev" | not stagecraft-translate --pipe-to-csv 2>&1 | FileCheck %s --check-prefix=CSV

// Tests DualPipeV on 2 ranks x 4 stages x 4 microbatches with an overlap
// gain: V placement, overlapped F&B in the steady state, split backward
// (I then W) in the cool-down, and PP + 1 = 5 chunk activations at the peak.
// CHECK-LABEL: pipe.schedule @v_dualpipev for @v
// CHECK-SAME: makespan = 2.400000e+01 : f64
// CHECK-SAME: peak_memory = array<f64: 5.000000e+00, 5.000000e+00>
// CHECK:      pipe.rank 0 stages [@s0, @s3] {
// CHECK-NEXT:   pipe.forward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 1
// CHECK-NEXT:   pipe.forward @s0 mb 2
// CHECK-NEXT:   pipe.forward @s3 mb 0
// CHECK-NEXT:   pipe.backward_input @s3 mb 0
// CHECK-NEXT:   pipe.backward_weight @s3 mb 0
// CHECK-NEXT:   pipe.forward @s3 mb 1
// CHECK-NEXT:   pipe.forward_backward @s0 mb 3, @s3 mb 1
// CHECK-NEXT:   pipe.forward_backward @s3 mb 2, @s0 mb 0
// CHECK:      pipe.rank 1 stages [@s1, @s2] {
// CSV: error: 'pipe.schedule' op 0F3+3B1 overlaps a forward and a backward, which the PyTorch CSV cannot express
pipe.pipeline @v ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
}
