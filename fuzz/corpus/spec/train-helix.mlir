// The reference transformer cut at the attention boundary for HelixPipe:
// five parameter blocks (four layers) on two ranks, each block but the last
// followed by its core attention:
//   stagecraft-run examples/train-helix.mlir --schedule=helix --train --steps=20
pipe.pipeline @helix ranks(2) microbatches(4) {
  pipe.stage @b0 cost(forward = 0.25, backward_input = 0.5, backward_weight = 0.0) attention(forward = 0.5, backward = 1.0)
  pipe.stage @b1 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 0.5, backward = 1.0)
  pipe.stage @b2 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 0.5, backward = 1.0)
  pipe.stage @b3 cost(forward = 1.0, backward_input = 2.0, backward_weight = 0.0) attention(forward = 0.5, backward = 1.0)
  pipe.stage @b4 cost(forward = 0.75, backward_input = 1.5, backward_weight = 0.0)
}
