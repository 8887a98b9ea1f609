// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b | stagecraft-translate --pipe-to-chrome-trace > %t.json
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1]))['traceEvents']; [print(e['name'], e['tid'], int(e['ts']), int(e['dur'])) for e in d if e['ph'] == 'X' and e['cat'] in ('gather', 'reduce', 'optimizer', 'forward')]; [print(e['tid'], e['args']['name']) for e in d if e['name'] == 'thread_name']" %t.json | FileCheck %s --check-prefix=TRACE

// Tests the summary and the Chrome trace inside fully sharded data
// parallelism (1F1B on 2 ranks x 2 microbatches, F = I = W = 1, 2-byte
// stages over 2 replicas): each rank gathers its stage's weights over
// [0, 1], so the pipeline starts 1 late; the reduce-scatters follow each
// stage's last backward (rank 1 at 8, rank 0 at 10); the step ends at 11.

// SUMMARY: data parallel: 2 replicas, sharding full, reductions torch's rule
// SUMMARY-NEXT: step 11 (every rank's optimizer step done), lower bound 7 (step / bound 1.5714); the pipeline's compute starts 1 late for its weights
// SUMMARY-NEXT: rank   collectives       exposed   optimizer    held bytes  ops
// SUMMARY-NEXT:    0             2             2           0             5  1 gathers, 1 reductions
// SUMMARY-NEXT:    1             2             1           0             5  1 gathers, 1 reductions

// The compute is drawn 1 (1000 us) late; the collectives on a track per rank.
// TRACE: 0F0 0 1000 1000
// TRACE: gather s0 2 0 1000
// TRACE-NEXT: reduce s0 #0 2 10000 1000
// TRACE-NEXT: optimizer 0 11000 0
// TRACE-NEXT: gather s1 3 0 1000
// TRACE-NEXT: reduce s1 #0 3 8000 1000
// TRACE-NEXT: optimizer 1 9000 0
// TRACE: 0 rank 0
// TRACE-NEXT: 1 rank 1
// TRACE-NEXT: 2 rank 0 data parallel
// TRACE-NEXT: 3 rank 1 data parallel
pipe.pipeline @fsdp ranks(2) microbatches(2) data_parallel(degree = 2, sharding = full) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
}
