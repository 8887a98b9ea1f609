// Eight equal transformer layers on two ranks of one kind of device, for
// the straggler tests: cut 4 + 4 while both ranks run at their planned
// speed; once rank 1 is measured slower, re-cut with fewer layers there.
pipe.pipeline @train ranks(2) microbatches(4) {
  pipe.layer @block count(8) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
