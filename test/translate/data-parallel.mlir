// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b | stagecraft-translate --pipe-to-chrome-trace > %t.json
// RUN: stagecraft-opt %s --pipe-schedule=kind=zb-h1 --pipe-insert-comm | stagecraft-translate --pipe-to-csv | FileCheck %s --check-prefix=CSV
// RUN: stagecraft-opt %s --pipe-schedule=kind=zb-h1 | stagecraft-translate --pipe-to-csv 2>/dev/null | FileCheck %s --check-prefix=COMPUTE
// RUN: stagecraft-opt %s --pipe-schedule=kind=zb-h1 | stagecraft-translate --pipe-to-csv 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: stagecraft-translate --pipe-to-problem %s | FileCheck %s --check-prefix=PROBLEM
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1]))['traceEvents']; [print(e['name'], e['tid'], int(e['ts']), int(e['dur'])) for e in d if e['ph'] == 'X' and e['cat'] in ('gather', 'reduce', 'optimizer', 'forward')]; [print(e['tid'], e['args']['name']) for e in d if e['name'] == 'thread_name']" %t.json | FileCheck %s --check-prefix=TRACE

// Tests the summary and the Chrome trace inside fully sharded data
// parallelism (1F1B on 2 ranks x 2 microbatches, F = I = W = 1, 2-byte
// stages over 2 replicas): each rank gathers its stage's weights over
// [0, 1], so the pipeline starts 1 late; the reduce-scatters follow each
// stage's last backward (rank 1 at 8, rank 0 at 10); the step ends at 11.

// torch's CSV with communication carries the data-parallel cells: each
// stage's weights unsharded first, its REDUCE_GRAD right after its last W,
// the wait at the row's end (no later reduction on the rank), then the
// reshard.
// CSV: 0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0I0,0WAIT_SEND_F0,0W0,0RECV_B1,0I1,0WAIT_SEND_F1,0W1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0RESHARD
// CSV-NEXT: 1UNSHARD,1RECV_F0,1F0,1I0,1SEND_B0,1RECV_F1,1F1,1I1,1SEND_B1,1W0,1W1,1REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1,1WAIT_REDUCE_GRAD,1RESHARD
// Without communication torch adds its own reductions, and says so.
// COMPUTE: 0F0,0F1,0I0,0W0,0I1,0W1{{$}}
// REMARK: remark: the compute-only CSV leaves the gradient reductions to torch's rule

// SUMMARY: data parallel: 2 replicas, sharding full, reductions torch's rule
// SUMMARY-NEXT: step 11 (every rank's optimizer step done), lower bound 7 (step / bound 1.5714); the pipeline's compute starts 1 late for its weights
// SUMMARY-NEXT: rank   collectives       exposed   optimizer    held bytes  ops
// SUMMARY-NEXT:    0             2             2           0             5  1 gathers, 1 reductions
// SUMMARY-NEXT:    1             2             1           0             5  1 gathers, 1 reductions

// The problem JSON carries the data parallelism with the pipeline.
// PROBLEM: "data_parallel": {
// PROBLEM-NEXT: "degree": 2,
// PROBLEM-NEXT: "sharding": "full",
// PROBLEM-NEXT: "shard_group": 1,
// PROBLEM-NEXT: "latency": 0,
// PROBLEM-NEXT: "bandwidth": 1,
// PROBLEM-NEXT: "inter_latency": 0,
// PROBLEM-NEXT: "inter_bandwidth": 1,
// PROBLEM-NEXT: "optimizer": 0,
// PROBLEM-NEXT: "gradient": [
// PROBLEM-NEXT: 2,
// PROBLEM-NEXT: 2
// PROBLEM-NEXT: ]

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
