#!/usr/bin/env python3
"""Docs are tests: runs every shell block of README.md and docs/*.md.

Run from anywhere after the set-up command (`bash scripts/demo.sh`); it is
part of the test command (`bash scripts/test.sh`). Usage:

    python3 scripts/doc-test.py [FILE.md ...]     (default: README.md docs/*.md)

What a block's info string (the word after the opening fence) means:

  sh          every command is run from the repository root with
              `bash -o pipefail -c`, one at a time (a line ending in `\\`
              continues the command); each must exit 0.
  sh gpu      the same, where `nvidia-smi -L` lists a GPU; skipped, and
              said so, elsewhere.
  sh titan   the same, where torchtitan imports in the wheel's virtual
              environment (the test command installs it there); skipped,
              and said so, elsewhere.
  sh setup    the README's set-up and test commands: run like `sh`, except
              `bash scripts/test.sh`, the command that runs this runner.
  output      what the last command of the `sh` block just above prints on
              stdout: compared line by line (trailing spaces ignored); a
              line `...` stands for any number of lines.
  output tolerance=R
              the same, but each number matches within relative
              tolerance R (absolute R where the shown number is 0), and
              a number written with `~` after it (`12.3~ ms`) is a
              measured figure: it matches any number. Seeded outputs
              (losses, planned figures) are compared this way, so that a
              change shows.
  output numbers-vary
              any number in a line matches any number; the words and
              layout are still compared. Only for output whose every
              number differs between runs (measured times, a search under
              a time limit); otherwise `tolerance=R` with `~` on the
              measured figures.
  python, policy
              when its first line is `# PATH` of a file in the
              repository, the block's other lines must equal that file's
              lines after its leading `#` comment lines (a script a
              reader copies is the one the tests run). Other python
              blocks are not checked.
  mlir        when its first line is `// PATH` of a file in the repository,
              the block's other lines must equal that file's lines after
              its leading comment lines. Other mlir blocks are not checked.
  text        not run, not compared (grammars, illustrations).

Every block must name its language, so that no command escapes by being
unmarked. Commands run with the wheel's virtual environment
(build-python/venv, where the test command installs the wheel) first on
PATH, as an activated environment is for a user: `python`, `torchrun` and
`python -m stagecraft.examples...` are the installed wheel's. Commands may write files only under `out/` (the scratch folder,
ignored by git, emptied before and removed after the run): any other file
created or changed in the checkout, build folders aside, fails the run.
"""

import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = "out"
TIMEOUT_S = 1200
# The wheel's environment first on PATH, as an activated one is.
ENV = dict(os.environ, PATH=os.path.join(ROOT, "build-python", "venv", "bin")
           + os.pathsep + os.environ.get("PATH", ""))
# The command that runs this runner: running it again would recurse.
TEST_COMMAND = "bash scripts/test.sh"


class Block:
    def __init__(self, path, line, info, lines):
        self.path = path
        self.line = line  # 1-based line of the opening fence
        words = info.split()
        self.lang = words[0] if words else ""
        self.attrs = set(words[1:])
        self.lines = lines

    def where(self):
        return f"{self.path}:{self.line}"


def parse_blocks(path):
    blocks = []
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        text = f.read().split("\n")
    i = 0
    while i < len(text):
        m = re.match(r"^```(.*)$", text[i])
        if not m:
            i += 1
            continue
        start, info, body = i + 1, m.group(1).strip(), []
        i += 1
        while i < len(text) and not text[i].startswith("```"):
            body.append(text[i])
            i += 1
        if i == len(text):
            raise SystemExit(f"{path}:{start}: code block never closed")
        blocks.append(Block(path, start, info, body))
        i += 1
    return blocks


def commands(block):
    """The block's commands: continuation lines joined, blanks and
    whole-line comments dropped."""
    out, current, first = [], "", None
    for n, line in enumerate(block.lines):
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if first is None:
            first = block.line + 1 + n
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        out.append((first, (current + line).strip()))
        current, first = "", None
    if current:
        out.append((first, current.strip()))
    return out


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# For compared numbers: "2.801..6.270" is two numbers, not 2.801, .6, .270.
COMPARED = r"[-+]?(?:\d+(?:\.\d+)?|(?<![.\d])\.\d+)(?:[eE][-+]?\d+)?"


def words(part):
    return r"\s+".join(re.escape(w) for w in re.split(r"\s+", part))


def line_pattern(expected, numbers_vary):
    if not numbers_vary:
        return None
    parts = re.split(f"({NUMBER})", expected.rstrip())
    regex = ""
    for k, part in enumerate(parts):
        regex += NUMBER if k % 2 == 1 else words(part)
    return re.compile(regex + r"\s*$")


def tolerant_line(expected):
    """(pattern, shown numbers) of a line of a `tolerance=R` block: each
    number a group to compare, None where it is marked measured (`~`)."""
    parts = re.split(f"({COMPARED})(~?)", expected.rstrip())
    regex, shown = "", []
    for k in range(0, len(parts), 3):
        regex += words(parts[k])
        if k + 1 < len(parts):
            measured = parts[k + 2] == "~"
            regex += COMPARED if measured else f"({COMPARED})"
            if not measured:
                shown.append(float(parts[k + 1]))
    return re.compile(regex + r"\s*$"), shown


def matches(expected, actual, numbers_vary, tolerance=None):
    """Whether `actual` lines match `expected` lines, `...` matching any
    run of lines. Returns None on success, else a message."""
    exp = [e.rstrip() for e in expected]
    act = [a.rstrip() for a in actual]

    def same(e, a):
        if tolerance is not None:
            pattern, shown = tolerant_line(e)
            m = pattern.fullmatch(a)
            return m is not None and all(
                abs(float(got) - want) <= tolerance * (abs(want) or 1.0)
                for got, want in zip(m.groups(), shown))
        pattern = line_pattern(e, numbers_vary)
        return pattern.fullmatch(a) is not None if pattern else e == a

    # Backtracking over the `...` lines (few per block).
    def walk(i, j):
        if i == len(exp):
            return j == len(act)
        if exp[i] == "...":
            return any(walk(i + 1, k) for k in range(j, len(act) + 1))
        return j < len(act) and same(exp[i], act[j]) and walk(i + 1, j + 1)

    if walk(0, 0):
        return None
    # Name the first expected line that appears nowhere in the output.
    for e in exp:
        if e != "..." and not any(same(e, a) for a in act):
            return f"this line is not in the output: {e!r}"
    return "the lines are there, but not in this order or with other lines between"


def has_gpu():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                           text=True, timeout=60)
        return r.returncode == 0 and "GPU" in r.stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def has_torchtitan():
    """Whether the python the docs' commands run imports torchtitan."""
    try:
        r = subprocess.run(["python", "-c", "import torchtitan"], env=ENV,
                           capture_output=True, timeout=120)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def checkout_state():
    """Untracked, ignored and modified paths, build folders and the scratch
    folder aside."""
    r = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True)
    state = set()
    for line in r.stdout.splitlines():
        path = line[3:].strip('"')  # git quotes names with spaces
        top = path.split("/", 1)[0]
        if top == "build" or top.startswith("build-") or top == SCRATCH:
            continue
        if "__pycache__" in path or path.endswith(".pyc"):
            continue
        state.add(line)
    return state


def main(argv):
    files = argv[1:] or ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
        if f.endswith(".md"))
    shutil.rmtree(os.path.join(ROOT, SCRATCH), ignore_errors=True)
    before = checkout_state()
    gpu = has_gpu()
    titan = has_torchtitan()
    failures, ran, skipped = [], 0, []
    start = time.time()
    for path in files:
        blocks = parse_blocks(path)
        last_stdout = None
        for b in blocks:
            if not b.lang:
                failures.append(f"{b.where()}: a code block without a language "
                                "(say sh, output, mlir or text)")
                continue
            if b.lang == "sh":
                unknown = b.attrs - {"gpu", "setup", "titan"}
                if unknown:
                    failures.append(f"{b.where()}: unknown sh attribute(s) "
                                    f"{sorted(unknown)}")
                    continue
                last_stdout = None
                for line, cmd in commands(b):
                    where = f"{path}:{line}"
                    if "gpu" in b.attrs and not gpu:
                        skipped.append(f"{where}: {cmd}  (needs a GPU)")
                        continue
                    if "titan" in b.attrs and not titan:
                        skipped.append(f"{where}: {cmd}  (needs torchtitan: "
                                       "pip install torchtitan==0.3.0)")
                        continue
                    if "setup" in b.attrs and cmd.split("#")[0].strip() == TEST_COMMAND:
                        skipped.append(f"{where}: {cmd}  (the test command, "
                                       "which runs this runner)")
                        continue
                    t0 = time.time()
                    try:
                        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd],
                                           cwd=ROOT, capture_output=True,
                                           text=True, timeout=TIMEOUT_S,
                                           env=ENV)
                        rc, out, err = r.returncode, r.stdout, r.stderr
                    except subprocess.TimeoutExpired:
                        rc, out, err = "timeout", "", f"ran past {TIMEOUT_S} s"
                    ran += 1
                    print(f"{'ok  ' if rc == 0 else 'FAIL'} {where} "
                          f"({time.time() - t0:.1f} s): {cmd}", flush=True)
                    if rc != 0:
                        lines = (out + err).splitlines()
                        tail = "\n".join(lines[-15:])
                        # A launcher (torchrun) ends with its own summary:
                        # show the first traceback too.
                        starts = [i for i, line in enumerate(lines)
                                  if line.startswith("Traceback")]
                        if starts and starts[0] < len(lines) - 15:
                            tail = "\n".join(
                                lines[starts[0]:starts[0] + 25]) + \
                                "\n...\n" + tail
                        failures.append(f"{where}: exit {rc}: {cmd}\n{tail}")
                    last_stdout = out
            elif b.lang == "output":
                tolerance = None
                for a in list(b.attrs):
                    if a.startswith("tolerance="):
                        try:
                            tolerance = float(a[len("tolerance="):])
                        except ValueError:
                            tolerance = -1.0
                        if not tolerance >= 0.0:
                            failures.append(f"{b.where()}: {a}: the "
                                            "tolerance must be a number >= 0")
                        b.attrs.discard(a)
                unknown = b.attrs - {"numbers-vary"}
                if unknown:
                    failures.append(f"{b.where()}: unknown output attribute(s) "
                                    f"{sorted(unknown)}")
                    continue
                if last_stdout is None:
                    if any(s.startswith(f"{path}:") for s in skipped[-1:]):
                        continue  # its command was skipped (GPU)
                    failures.append(f"{b.where()}: an output block must follow "
                                    "the sh block whose last command prints it")
                    continue
                problem = matches(b.lines, last_stdout.splitlines(),
                                  "numbers-vary" in b.attrs, tolerance)
                if problem:
                    failures.append(f"{b.where()}: the output shown differs from "
                                    f"what the command prints: {problem}\n"
                                    "printed:\n" + last_stdout)
                else:
                    print(f"ok   {b.where()}: output as shown", flush=True)
                last_stdout = None
            elif b.lang in ("mlir", "python", "policy"):
                comment = "//" if b.lang == "mlir" else "#"
                suffix = {"mlir": "mlir", "python": "py",
                          "policy": "policy"}[b.lang]
                m = re.match(rf"^{comment} (\S+\.{suffix})$",
                             b.lines[0]) if b.lines else None
                if not m or not os.path.isfile(os.path.join(ROOT, m.group(1))):
                    continue
                with open(os.path.join(ROOT, m.group(1)), encoding="utf-8") as f:
                    lines = f.read().rstrip("\n").split("\n")
                while lines and lines[0].startswith(comment):
                    lines.pop(0)
                if [l.rstrip() for l in b.lines[1:]] != [l.rstrip() for l in lines]:
                    failures.append(f"{b.where()}: the block shows {m.group(1)} "
                                    "but differs from the file")
                else:
                    print(f"ok   {b.where()}: shows {m.group(1)} as it is",
                          flush=True)
    after = checkout_state()
    left = sorted(after - before)
    if left:
        failures.append("files created or changed outside out/ and the build "
                        "folders:\n  " + "\n  ".join(left))
    shutil.rmtree(os.path.join(ROOT, SCRATCH), ignore_errors=True)
    for s in skipped:
        print(f"skip {s}")
    print(f"doc-test: {ran} commands run in {time.time() - start:.0f} s, "
          f"{len(skipped)} skipped, {len(failures)} failures")
    for f in failures:
        print(f"\nFAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
