// A diamond: @src feeds two branches (@a0 -> @a1, and @b0, twice as
// long) that @join takes together, then @head (the loss); latency 0.1.
pipe.pipeline @diamond ranks(4) microbatches(6) latency(0.1) {
  pipe.stage @src cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(0.5)
  pipe.stage @a0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @a1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b0 inputs(@src) cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0)
  pipe.stage @join inputs(@a1, @b0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @head cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
