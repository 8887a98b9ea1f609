"""Runs a command under a time limit and prints its output, then its exit
status as "exit N" (so FileCheck can check the status a tool documents).

  exit-status.py SECONDS COMMAND ARGS...
"""
import subprocess
import sys

limit = float(sys.argv[1])
try:
    done = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=limit)
except subprocess.TimeoutExpired:
    print(f"timed out after {limit} s")
    sys.exit(1)
print(done.stdout, end="")
print(f"exit {done.returncode}")
