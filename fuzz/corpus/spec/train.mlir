// The reference transformer split into four stages of one layer on two
// ranks (two stages each, so V and interleaved placements apply too):
//   stagecraft-run examples/train.mlir --schedule=zb-h1 --train --steps=20
pipe.pipeline @train ranks(2) microbatches(4) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
