// RUN: stagecraft-opt %s | FileCheck %s
// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s

// Tests the spec syntax: defaults filled in (weight_grad = activation,
// activation = 1.0, latency 0 elided), numbers in their exact short form.
// CHECK-LABEL: pipe.pipeline @demo ranks(4) microbatches(8) {
// CHECK-NEXT: pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
// CHECK-NEXT: pipe.stage @s1 cost(forward = 1.5, backward_input = 2.0, backward_weight = 0.25) memory(activation = 1.0, weight_grad = 1.0)
// CHECK-NEXT: pipe.stage @s2 cost(forward = 3.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 2.0)
// CHECK-NEXT: pipe.stage @s3 cost(forward = 0.001, backward_input = 1.0e+20, backward_weight = 0.0) memory(activation = 1.0, weight_grad = 1.0)
pipe.pipeline @demo ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(backward_weight = 0.25, forward = 1.5, backward_input = 2)
  pipe.stage @s2 cost(forward = 3.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0)
  pipe.stage @s3 cost(forward = 0.001, backward_input = 1.0e20, backward_weight = 0.0)
}

// Tests the optional overlapped cost.
// CHECK-LABEL: pipe.pipeline @overlap ranks(1) microbatches(2) {
// CHECK-NEXT: pipe.stage @o cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = 2.5) memory(activation = 1.0, weight_grad = 1.0)
pipe.pipeline @overlap ranks(1) microbatches(2) {
  pipe.stage @o cost(forward_backward = 2.5, forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// Tests an overlapped forward+backward action.
// CHECK-LABEL: pipe.schedule @fb for @overlap {
// CHECK-NEXT: pipe.rank 0 stages [@o] {
// CHECK-NEXT: pipe.forward @o mb 0
// CHECK-NEXT: pipe.forward_backward @o mb 1, @o mb 0
// CHECK-NEXT: pipe.backward @o mb 1
pipe.schedule @fb for @overlap {
  pipe.rank 0 stages [@o] {
    pipe.forward @o mb 0
    pipe.forward_backward @o mb 1, @o mb 0
    pipe.backward @o mb 1
  }
}

// Tests attention(...) and attention actions on a rank other than their
// stage's.
// CHECK-LABEL: pipe.pipeline @attn ranks(2) microbatches(1) {
// CHECK-NEXT: pipe.stage @x layers(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 1.0) attention(forward = 2.0, backward = 4.0, memory = 0.5)
pipe.pipeline @attn ranks(2) microbatches(1) {
  pipe.stage @x layers(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) attention(memory = 0.5, backward = 4.0, forward = 2.0)
  pipe.stage @y cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// CHECK-LABEL: pipe.schedule @attn_hand for @attn attributes {recompute} {
// CHECK: pipe.attention_forward @x mb 0
// CHECK: pipe.attention_backward @x mb 0
pipe.schedule @attn_hand for @attn attributes {recompute} {
  pipe.rank 0 stages [@x] {
    pipe.forward @x mb 0
    pipe.backward @x mb 0
  }
  pipe.rank 1 stages [@y] {
    pipe.attention_forward @x mb 0
    pipe.forward @y mb 0
    pipe.backward @y mb 0
    pipe.attention_backward @x mb 0
  }
}

// Tests latency and pins.
// CHECK-LABEL: pipe.pipeline @pinned ranks(2) microbatches(1) latency(0.5) {
// CHECK-NEXT: pipe.stage @a rank(1) cost(
// CHECK-NEXT: pipe.stage @b rank(0) cost(
pipe.pipeline @pinned ranks(2) microbatches(1) latency(0.5) {
  pipe.stage @a rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// Tests a hand-written schedule with every action kind.
// CHECK-LABEL: pipe.schedule @hand for @pinned {
// CHECK-NEXT: pipe.rank 0 stages [@b] {
// CHECK-NEXT: pipe.forward @b mb 0
// CHECK-NEXT: pipe.backward @b mb 0
// CHECK-NEXT: }
// CHECK-NEXT: pipe.rank 1 stages [@a] {
// CHECK-NEXT: pipe.forward @a mb 0
// CHECK-NEXT: pipe.backward_input @a mb 0
// CHECK-NEXT: pipe.backward_weight @a mb 0
pipe.schedule @hand for @pinned {
  pipe.rank 0 stages [@b] {
    pipe.forward @b mb 0
    pipe.backward @b mb 0
  }
  pipe.rank 1 stages [@a] {
    pipe.forward @a mb 0
    pipe.backward_input @a mb 0
    pipe.backward_weight @a mb 0
  }
}
