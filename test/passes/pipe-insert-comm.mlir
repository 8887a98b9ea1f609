// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" --pipe-insert-comm --pipe-verify-schedule | FileCheck %s
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" --pipe-insert-comm --pipe-insert-comm | FileCheck %s

// Tests 1F1B on 2 ranks: a send where the activation is produced, a receive
// where it is first needed, and the send of microbatch 1's activation paired
// with the receive of microbatch 0's gradient in one group, as Megatron's
// send_forward_recv_backward. Inserting again changes nothing.
// CHECK-LABEL: pipe.schedule @two_1f1b for @two
// CHECK:      pipe.rank 0 stages [@s0] {
// CHECK-NEXT:   pipe.forward @s0 mb 0
// CHECK-NEXT:   pipe.send_activation @s0 mb 0 to 1
// CHECK-NEXT:   pipe.forward @s0 mb 1
// CHECK-NEXT:   pipe.group {
// CHECK-NEXT:     pipe.send_activation @s0 mb 1 to 1
// CHECK-NEXT:     pipe.recv_gradient @s1 mb 0 from 1
// CHECK-NEXT:   }
// CHECK-NEXT:   pipe.backward @s0 mb 0
// CHECK-NEXT:   pipe.recv_gradient @s1 mb 1 from 1
// CHECK-NEXT:   pipe.backward @s0 mb 1
// CHECK-NEXT: }
// CHECK:      pipe.rank 1 stages [@s1] {
// CHECK-NEXT:   pipe.recv_activation @s0 mb 0 from 0
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.backward @s1 mb 0
// CHECK-NEXT:   pipe.group {
// CHECK-NEXT:     pipe.send_gradient @s1 mb 0 to 0
// CHECK-NEXT:     pipe.recv_activation @s0 mb 1 from 0
// CHECK-NEXT:   }
pipe.pipeline @two ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that adjacent stages on one rank exchange nothing: the block of
// @a and @b on rank 0 sends only @b's output.
// CHECK-LABEL: pipe.schedule @blocks_1f1b for @blocks
// CHECK:      pipe.rank 0 stages [@a, @b] {
// CHECK-NEXT:   pipe.forward @a mb 0
// CHECK-NEXT:   pipe.forward @b mb 0
// CHECK-NEXT:   pipe.group {
// CHECK-NEXT:     pipe.send_activation @b mb 0 to 1
// CHECK-NEXT:     pipe.recv_gradient @c mb 0 from 1
// CHECK-NEXT:   }
// CHECK-NEXT:   pipe.backward @b mb 0
// CHECK-NEXT:   pipe.backward @a mb 0
pipe.pipeline @blocks ranks(2) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @c cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
