// RUN: stagecraft-opt %s --pipe-schedule="kind=dualpipev" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=dualpipev" | stagecraft-translate --pipe-to-csv > %t.csv
// RUN: FileCheck %s --check-prefix=CSV < %t.csv
// RUN: stagecraft-translate --pipe-from-csv --pipe-spec=%s %t.csv | stagecraft-opt --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=BACK
// RUN: stagecraft-opt %s --pipe-schedule="kind=dualpipev" --pipe-insert-comm | stagecraft-translate --pipe-to-csv | FileCheck %s --check-prefix=COMMS
// RUN: printf '(0F0;3X0)OVERLAP_F_B\n\n' > %t.bad.csv
// RUN: not stagecraft-translate --pipe-from-csv --pipe-spec=%s %t.bad.csv 2>&1 | FileCheck %s --check-prefix=BAD

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
// The overlapped actions as torch spells OVERLAP_F_B, both ways: the CSV
// read back against the spec is the same schedule (same makespan).
// CSV: 0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,
// BACK: makespan = 2.400000e+01 : f64
// BACK: pipe.forward_backward @s0 mb 3, @s3 mb 1
// COMMS: (0F3;3B1)OVERLAP_F_B
// COMMS-SAME: SEND_F
// BAD: error: bad overlapped action '(0F0;3X0)OVERLAP_F_B': expected (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B, e.g. (0F3;1B1)OVERLAP_F_B
pipe.pipeline @v ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5)
}
