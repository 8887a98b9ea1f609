// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe --pipe-simulate | FileCheck %s --check-prefix=SIM
// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe | stagecraft-translate --pipe-to-chrome-trace > %t.json
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); ev=d['traceEvents']; print([e['args']['name'] for e in ev if e['name']=='thread_name']); print([(e['tid'], e['name'], e['ts'], e['dur']) for e in ev if e.get('cat')=='transfer'])" %t.json | FileCheck %s --check-prefix=TRACE
// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY
// RUN: stagecraft-opt %s --pipe-schedule=kind=gpipe | stagecraft-translate --pipe-to-plan --unit-bytes=1000 -o %t.plan.json
// RUN: %python -c "import json,sys; p=json.load(open(sys.argv[1])); print(p['links']); print([r.get('device') for r in p['ranks']]); print(sorted({(o['op'], o['bytes']) for r in p['ranks'] for o in r['ops'] if o['op'] in ('send', 'recv')}))" %t.plan.json | FileCheck %s --check-prefix=PLAN

// Tests that a link carries one transfer at a time. GPipe on a fast rank 0
// and a half-speed rank 1; every transfer crosses an inter link and takes
// output 2 / bandwidth 1 = 2, longer than a forward, so they queue:
//   rank 0: F [0,1] [1,2] [2,3] [3,4]; link 0 -> 1: [1,3] [3,5] [5,7] [7,9]
//   rank 1: F (0.5 / 0.5 = 1) at 3, 5, 7, 9; B (2) [10,12] .. [16,18]
//   link 1 -> 0: [12,14] [14,16] [16,18] [18,20]
//   rank 0: B (2) at 14, 16, 18, 20: the step ends at 22.
// Without contention rank 1's forwards would start at 3, 4, 5, 6 and the
// step would end at 19.
// SIM: makespan = 2.200000e+01
// SUMMARY: schedule @linked_gpipe for @linked: 2 ranks, 2 stages, 4 microbatches, links: nodes of 1, intra latency 0 bandwidth 4, inter latency 0 bandwidth 1 (time units, output units per time unit; one transfer at a time per directed link)
// SUMMARY-NEXT: makespan 22,

// The trace: a track per directed link after the rank tracks, each transfer
// over the time it held its link (microseconds: 1000 per unit).
// TRACE: ['rank 0', 'rank 1', 'link 0 -> 1', 'link 1 -> 0']
// TRACE-NEXT: [(2, 'from 0F0', 1000, 2000), (2, 'from 0F1', 3000, 2000), (2, 'from 0F2', 5000, 2000), (2, 'from 0F3', 7000, 2000), (3, 'from 1B0', 12000, 2000), (3, 'from 1B1', 14000, 2000), (3, 'from 1B2', 16000, 2000), (3, 'from 1B3', 18000, 2000)]

// The plan: the links, each rank's device (speed; memory where bounded) and
// messages of output x unit bytes (2 x 1000) on both ends, not the stage's
// activation (1 x 1000).
// PLAN: {'node': 1, 'intra': {'latency': 0, 'bandwidth': 4}, 'inter': {'latency': 0, 'bandwidth': 1}}
// PLAN-NEXT: [{'name': 'fast', 'speed': 1, 'memory': 40}, {'name': 'slow', 'speed': 0.5}]
// PLAN-NEXT: [('recv', 2000), ('send', 2000)]
pipe.pipeline @linked ranks(2) microbatches(4) devices(@fast x 1, @slow x 1) links(node = 1, intra = (latency = 0.0, bandwidth = 4.0), inter = (latency = 0.0, bandwidth = 1.0)) {
  pipe.device @fast speed(1.0) memory(40.0)
  pipe.device @slow speed(0.5)
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) output(2.0)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) output(2.0)
}
