#!/usr/bin/env python3
"""Who should lower a Stagecraft plan for torch's runtime? The same plan
(uniform costs) run by stagecraft.torch.schedule with lowering="stagecraft"
(the communication Stagecraft verified with the plan) and with
lowering="torch" (torch's own passes over the compute-only order), the two
alternating step by step, 20 steps each after a warm-up, on 2 gloo
processes (one per core, one thread each), the small transformer of
python/tests/torch_worker.py (one block per stage), 8 microbatches. RUNS
launches per kind; each gives a median step, the table their median and
range.

    build-python/venv/bin/python bench/torch-lowering-bench.py [RUNS]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "python", "tests", "torch_worker.py")
KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def launch(kind, world=2, n_mb=8):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen(
            ["taskset", "-c", str(r), sys.executable, WORKER, "lowering",
             kind, str(r), str(world), str(port), out, str(n_mb)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env) for r in range(world)]
        for p in procs:
            output, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                sys.exit(f"{kind}: a worker failed:\n{output[-2000:]}")
        with open(os.path.join(out, "rank0.json")) as f:
            return json.load(f)


def cell(values):
    return (f"{1e3 * statistics.median(values):.2f} "
            f"({1e3 * min(values):.2f}..{1e3 * max(values):.2f})")


print("| kind | Stagecraft's lowering ms (range) | torch's lowering ms "
      "(range) | torch / Stagecraft |")
print("|---|---|---|---|")
for kind in KINDS:
    ours, theirs = [], []
    for _ in range(runs):
        result = launch(kind)
        ours.append(result["stagecraft"])
        theirs.append(result["torch"])
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"| {kind} | {cell(ours)} | {cell(theirs)} | {ratio:.3f} |")
