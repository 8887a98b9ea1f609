// HelixPipe: eight layers cut at the attention boundary into nine parameter
// blocks on four ranks. Each block but the last is followed by its core
// attention, a separate task that the schedule places on another rank:
//   stagecraft-opt examples/helix.mlir --pipe-schedule="kind=helix folds=2" \
//     --pipe-verify-schedule --pipe-simulate | stagecraft-translate --pipe-to-summary
pipe.pipeline @helix ranks(4) microbatches(8) latency(0.05) {
  pipe.stage @b0 cost(forward = 0.25, backward_input = 0.5, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b1 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b2 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b3 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b4 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b5 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b6 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b7 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 1.0, backward = 2.0, memory = 0.5)
  pipe.stage @b8 cost(forward = 0.75, backward_input = 1.5, backward_weight = 0.0) memory(activation = 0.25)
}
