// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" --pipe-verify-schedule --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" | stagecraft-opt --split-input-file | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: not stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b recompute=selective" 2>&1 | FileCheck %s --check-prefix=SELECTIVE
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" | stagecraft-translate --split-input-file --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=auto time-limit=1" --pipe-simulate | FileCheck %s --check-prefix=AUTO
// RUN: not stagecraft-opt %s --pipe-schedule="recompute=sometimes" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" | stagecraft-translate --pipe-to-csv 2>&1 | FileCheck %s --check-prefix=CSV
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b recompute=full" | stagecraft-translate --pipe-to-csv 2>&1 | FileCheck %s --check-prefix=CSVFULL

// Tests recompute=auto (the default with a capacity) on 1F1B, 2 ranks: rank
// 0 holds 2 microbatches of activation 2 at once, plus params 1: 5 > 4. Each
// backward re-materializes its own activation while the next forward's is
// live, so 3 of 4 forwards on rank 0 keep only `recomputed` (0.5): peak
// 1 + 2 + 0.5. The one in flight longest (mb 1) goes first; mb 0 need not.
// CHECK-LABEL: pipe.schedule @p_1f1b for @p
// CHECK-SAME: makespan = 1.700000e+01
// CHECK-SAME: peak_memory = array<f64: 3.500000e+00, 3.000000e+00>
// CHECK: pipe.rank 0 stages [@s0] {
// CHECK-NEXT: pipe.forward @s0 mb 0{{$}}
// CHECK-NEXT: pipe.forward @s0 mb 1 recompute full
// CHECK-NEXT: pipe.backward @s0 mb 0
// CHECK-NEXT: pipe.forward @s0 mb 2 recompute full
// CHECK: pipe.rank 1 stages [@s1] {
// CHECK-NOT: recompute
// CHECK: }
// ROUNDTRIP: pipe.pipeline @p ranks(2) microbatches(4) capacity(4.0) {
// ROUNDTRIP-NEXT: pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5) params(1.0)
// ROUNDTRIP-NEXT: pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.25) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5, selective = 1.0) params(1.0)
// ROUNDTRIP: pipe.forward @s0 mb 1 recompute full
// Tests recompute=selective without a capacity check failing: only @s1
// offers it (keeps 1.0, re-runs 0.25 before each backward); @s0 keeps
// everything, so rank 0 is over its capacity and the error says auto fits.
// SELECTIVE: error: cannot schedule pipeline @p as 1f1b: with recompute=selective, rank 0 peaks at 5 (params 1 + activations 4), above its capacity 4; recompute=auto fits (3 of 8 forwards recompute in full)
// SUMMARY: peak memory = params + live activations (within capacity where one is given); recomputed F = forwards that recompute in their backward, of those the rank runs
// SUMMARY-NEXT:  rank        busy        span   peak memory      params    capacity      recomputed F  stages
// SUMMARY-NEXT:     0          15          17           3.5           1           4          3/4 full  @s0
// SUMMARY-NEXT:     1          12          13             3           1           4               0/4  @s1
// Tests kind=auto searching kind x recomputation under the capacity.
// AUTO: pipe.schedule @p_auto for @p
// AUTO-SAME: auto_choice = "{{[^"]*}} + recompute {{(auto|none|full|selective)}}"
// AUTO-SAME: makespan = 1.600000e+01
// OPTION: pipe-schedule: recompute=sometimes is not one of none, full, selective, auto
// Tests what the PyTorch CSV says about recomputation, which it has no cell
// for: a per-microbatch mix torch cannot run, and whole stages it runs
// under torch.utils.checkpoint.
// CSV: warning: the CSV cannot carry this schedule's recomputation: stage 0 (@s0) recomputes microbatches [1, 2, 3] and keeps the others; torch's runtime runs one module for every microbatch, so it cannot mix: schedule with recompute=full (every forward) or none for torch, or run the mix with stagecraft-run
// CSV: 0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3
// CSVFULL: remark: every forward of @s0, @s1 recomputes: run those stages' modules under torch.utils.checkpoint (stagecraft.torch.schedule does)
pipe.pipeline @p ranks(2) microbatches(4) capacity(4.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5) params(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.25) params(1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5, selective = 1.0)
}
