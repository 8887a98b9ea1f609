// The reference transformer in eight one-layer stages on four ranks (two
// stages each, so V and interleaved placements apply), for the fault
// tolerance tests: a lost rank leaves three, two, ... survivors.
pipe.pipeline @train ranks(4) microbatches(8) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s4 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s5 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s6 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s7 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
