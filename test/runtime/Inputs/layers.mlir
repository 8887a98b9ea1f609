// Eight transformer layers on a fast and a slow device, for training a
// partitioned layer spec: --pipe-partition gives the fast rank the larger
// share.
pipe.pipeline @train ranks(2) microbatches(4) devices(@fast, @slow) {
  pipe.device @fast speed(1.0)
  pipe.device @slow speed(0.5)
  pipe.layer @embed_block cost(forward = 1.5, backward_input = 1.5, backward_weight = 1.5)
  pipe.layer @block count(6) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.layer @head_block cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0)
}
