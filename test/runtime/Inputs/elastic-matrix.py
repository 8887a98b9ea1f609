"""Runs stagecraft-run --elastic once per case and checks what the fault
tolerance promises: the final weights equal those of the run without a
failure (bitwise, or else within 1e-6 relative, and says which), and the
loss log has every step exactly once, each with the failure-free loss.

  elastic-matrix.py SPEC OUT [--launcher=CMD] CASE...

CASE is KIND:RANK:STEP[:MODE] (MODE kill, hang or checkpoint, as
--inject-failure takes it; several failures joined by '+' all go to one
elastic run, the k-th to the k-th attempt). Prints one line per case, "ok"
with what happened, or "FAIL" with why; exits 1 when any case failed.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

STEPS = 5
COMMON = ["--train", f"--steps={STEPS}", "--optimizer=adamw", "--lr=0.01"]


def run(args, limit=180):
    try:
        done = subprocess.run(args, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=limit)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {limit} s"
    return done.returncode, done.stdout


def losses(text):
    return [(int(m.group(1)), m.group(2), m.group(3) is not None)
            for m in re.finditer(
                r"^step (\d+) loss ([0-9.]+)( \(before the checkpoint "
                r"resumed from\))?$", text, re.M)]


def weights(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        out[name] = struct.unpack(f"<{len(data) // 4}f", data)
    return out


def compare(a, b):
    """'bitwise', a relative error, or a reason they differ."""
    if sorted(a) != sorted(b):
        return None, f"files differ: {sorted(set(a) ^ set(b))}"
    worst = 0.0
    for name in a:
        if len(a[name]) != len(b[name]):
            return None, f"{name}: sizes differ"
        for x, y in zip(a[name], b[name]):
            if x != y:
                worst = max(worst, abs(x - y) / max(abs(y), 1e-30))
    return worst, None


def main():
    spec, out = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    launcher = [a for a in rest if a.startswith("--launcher=")]
    cases = [a for a in rest if not a.startswith("--launcher=")]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rc, text = run(["stagecraft-run", spec, "--schedule=1f1b", *COMMON,
                    f"--dump-weights={out}/reference"])
    if rc != 0:
        print(f"FAIL: the failure-free run: {text}")
        return 1
    reference = weights(f"{out}/reference")
    expected = {k: v for k, v, _ in losses(text)}
    failed = False
    for n, case in enumerate(cases):
        kind, failures = case.split(":", 1)
        where = f"{out}/case{n}"
        rc, text = run(["stagecraft-run", "--elastic", spec,
                        f"--schedule={kind}", *COMMON,
                        f"--checkpoint-dir={where}/c", "--checkpoint-every=2",
                        f"--inject-failure={failures.replace('+', ',')}",
                        "--timeout=3s", f"--dump-weights={where}/w",
                        *launcher])
        problems = []
        if rc != 0:
            problems.append(f"exit {rc}")
        log = losses(text or "")
        steps = [k for k, _, _ in log]
        if steps != list(range(STEPS)):
            problems.append(f"loss log has steps {steps}, not 0..{STEPS - 1} "
                            "once each")
        for k, value, _ in log:
            if expected.get(k) != value:
                problems.append(f"step {k} loss {value}, failure-free "
                                f"{expected.get(k)}")
        worst = None
        if not problems:
            worst, why = compare(weights(f"{where}/w"), reference)
            if why:
                problems.append(why)
            elif worst > 1e-6:
                problems.append(f"weights differ by {worst:.3g} relative")
        if problems:
            failed = True
            print(f"{case}: FAIL: {'; '.join(problems)}")
            print(text)
            continue
        attempts = re.findall(r"^elastic: attempt \d+ on (\d+) ranks \(([^)]*)\)",
                              text, re.M)
        resumed = re.findall(r"^resumed at step (\d+)", text, re.M)
        path = " -> ".join(f"{k} on {r}" for r, k in attempts)
        start = (f"resumed at step {resumed[-1]}" if resumed
                 else "started over (no checkpoint yet)")
        print(f"{case}: ok: {path}; {start}; every step's loss once; "
              f"weights {'bitwise' if worst == 0 else f'within {worst:.2g}'}")
    return 1 if failed else 0


sys.exit(main())
