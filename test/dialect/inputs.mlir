// RUN: stagecraft-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Tests that a branching pipeline round-trips: inputs(...) after the name,
// inputs() for a second source, no inputs for the previous stage's output.
// CHECK: pipe.stage @vit0 inputs() cost(
// CHECK: pipe.stage @vit1 cost(
// CHECK: pipe.stage @text inputs() cost(
// CHECK: pipe.stage @llm0 inputs(@vit1, @text) cost(
pipe.pipeline @vlm ranks(2) microbatches(2) {
  pipe.stage @vit0 inputs() cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @vit1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @text inputs() cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @llm0 inputs(@vit1, @text) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @llm1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op inputs(...) names @nothing, which is not a stage of pipeline @p}}
  pipe.stage @b inputs(@nothing) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op inputs(...) names the stage itself: the stage graph must be acyclic}}
  pipe.stage @b inputs(@a, @b) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// A cycle needs a forward reference, which is refused.
pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op inputs(...) names @c, written after it: a stage takes outputs of stages written before it (so the graph is acyclic)}}
  pipe.stage @b inputs(@c) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @c inputs(@b) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op inputs(...) names @a twice}}
  pipe.stage @b inputs(@a, @a) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// @b feeds nothing: @c takes @a only.
pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op is unreachable from the loss: no stage takes its output, so it does not feed the last stage @c}}
  pipe.stage @b cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @c inputs(@a) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
