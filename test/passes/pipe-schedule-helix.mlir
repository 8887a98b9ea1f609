// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=helix folds=1" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=helix folds=1 recompute=none" --pipe-simulate | FileCheck %s --check-prefix=NORECOMPUTE
// RUN: not stagecraft-opt %s --split-input-file --pipe-schedule="kind=zb-h1" 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=auto" --pipe-verify-schedule | FileCheck %s --check-prefix=AUTO
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=helix folds=1" --pipe-insert-comm --pipe-verify-schedule | FileCheck %s --check-prefix=COMM
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=helix" | not stagecraft-translate --split-input-file --pipe-to-csv 2>&1 | FileCheck %s --check-prefix=CSV

// Tests HelixPipe on 2 ranks, 3 blocks (2 layers), 2 microbatches: block j
// on rank j mod 2; microbatch offset d runs layer j's attention on rank
// (j mod 2 + d + 1) mod 2, so the two attentions of a layer run on both
// ranks; backwards recompute their block's forward (B costs F + B).
// CHECK-LABEL: pipe.schedule @h_helix for @h
// CHECK-SAME: makespan = 1.600000e+01 : f64
// CHECK: pipe.rank 0 stages [@b0, @b2] {
// CHECK-DAG: pipe.attention_forward @b0 mb 1
// CHECK-DAG: pipe.attention_forward @b1 mb 0
// CHECK-DAG: pipe.attention_backward @b1 mb 0
// CHECK: pipe.rank 1 stages [@b1] {
// CHECK-DAG: pipe.attention_forward @b0 mb 0
// CHECK-DAG: pipe.attention_forward @b1 mb 1
// NORECOMPUTE: makespan = 1.200000e+01 : f64, peak_memory = array<f64: {{[^>]*}}>, span = {{[^}]*}}} {
// NORECOMPUTE-NOT: recompute full
// Tests that auto chooses helix for stages cut at their attention.
// AUTO: pipe.schedule @h_auto for @h attributes {auto_choice = "helix", kind = "auto"}
// OTHER: error: cannot schedule pipeline @h as zb-h1: stage @b0 has attention(...), a separate task that only kind=helix schedules
// Tests the transfers around attention: Q, K, V to the attention rank, its
// output to the next block's rank, and both gradients back.
// COMM: pipe.rank 0 stages [@b0, @b2] {
// COMM-NEXT: pipe.forward @b0 mb 0 recompute full
// COMM-NEXT: pipe.send_attention qkv @b0 mb 0 to 1
// COMM-NEXT: pipe.send_activation @b0 mb 0 to 1
// COMM: pipe.send_attention output @b0 mb 1 to 1
// COMM: pipe.send_attention output_grad @b1 mb 1 to 1
// COMM: pipe.send_attention qkv_grad @b1 mb 0 to 1
// COMM: pipe.recv_attention output_grad @b0 mb 1 from 1
// CSV: error: 'pipe.schedule' op {{.*}} is a separate attention task, which the PyTorch CSV cannot express
pipe.pipeline @h ranks(2) microbatches(2) {
  pipe.stage @b0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0) attention(forward = 1.0, backward = 1.0, memory = 0.5)
  pipe.stage @b1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0) attention(forward = 1.0, backward = 1.0)
  pipe.stage @b2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0)
}

// -----

// Tests recomputation's memory: a recomputed block keeps only its
// `recomputed` share (0.25 instead of 1.0) between forward and backward,
// and its backward re-materializes the whole activation until it ends.
// Rank 0 (b0, b2): 0.25 + 0.25, then b2's backward brings b2 back to 1.0:
// peak 1.25. Rank 1 (b1): 1.0 during its backward.
// CHECK-LABEL: pipe.schedule @r_helix for @r
// CHECK-SAME: peak_memory = array<f64: 1.250000e+00, 1.000000e+00>
// NORECOMPUTE-LABEL: pipe.schedule @r_helix for @r
// NORECOMPUTE-SAME: peak_memory = array<f64: 2.000000e+00, 1.000000e+00>
pipe.pipeline @r ranks(2) microbatches(1) {
  pipe.stage @b0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0) memory(activation = 1.0, recomputed = 0.25) attention(forward = 1.0, backward = 1.0)
  pipe.stage @b1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0) memory(activation = 1.0, recomputed = 0.25) attention(forward = 1.0, backward = 1.0)
  pipe.stage @b2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.0) memory(activation = 1.0, recomputed = 0.25)
}
