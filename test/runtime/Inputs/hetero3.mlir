// Nine transformer layers on three ranks, the middle one a quarter as fast:
// when a rank is lost, its device goes with it and the layers are cut
// again for the survivors' devices.
pipe.pipeline @train ranks(3) microbatches(4) devices(@fast, @slow, @fast) {
  pipe.device @fast speed(1.0)
  pipe.device @slow speed(0.25)
  pipe.layer @block count(9) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
