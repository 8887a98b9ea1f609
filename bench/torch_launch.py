"""Launches the ranks of python/tests/torch_worker.py for the torch
benchmarks: WORLD processes on gloo, pinned one per core (`taskset`), one
thread each; returns rank 0's JSON result. Exits naming the mode and kind
when a rank fails."""

import json
import os
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "python", "tests", "torch_worker.py")


def launch(mode, kind, world=2, n_mb=8, timeout=900, all_ranks=False,
           steps=None):
    """Rank 0's result, or every rank's (a list) with `all_ranks`; `steps`:
    how many measured steps the mode takes (its own default if None)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen(
            ["taskset", "-c", str(r % os.cpu_count()), sys.executable,
             WORKER, mode, kind, str(r), str(world), str(port), out,
             str(n_mb)] + ([str(steps)] if steps else []), env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for r in range(world)]
        texts = [p.communicate(timeout=timeout)[0] for p in procs]
        failed = [r for r, p in enumerate(procs) if p.returncode != 0]
        if failed:
            sys.exit(f"{mode} {kind}: rank(s) {failed} failed:\n" + "\n".join(
                f"--- rank {r}:\n{texts[r][-2500:]}" for r in failed))
        results = []
        for r in range(world if all_ranks else 1):
            with open(os.path.join(out, f"rank{r}.json")) as f:
                results.append(json.load(f))
        return results if all_ranks else results[0]
