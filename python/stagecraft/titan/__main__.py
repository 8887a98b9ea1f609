"""python -m stagecraft.titan plan|check: plan a torchtitan pipeline run, or
check a hand-written CSV against torchtitan's rules before launching."""

from __future__ import annotations

import argparse
import os
import sys

from .. import ScheduleError
from ._model import Hardware, Llm, from_config, load_config
from ._plan import plan
from ._profile import compute_dtype
from ._rules import CLASSES, check_run


def _shape(args) -> Llm | None:
    given = [args.layers, args.dim, args.heads, args.ffn_hidden, args.vocab]
    if all(v is None for v in given):
        return None
    if any(v is None for v in given):
        raise ScheduleError("give the whole shape: --layers --dim --heads "
                            "--ffn-hidden --vocab (--kv-heads defaults to "
                            "--heads)")
    return Llm(name=args.config or "model", layers=args.layers, dim=args.dim,
               heads=args.heads, kv_heads=args.kv_heads or args.heads,
               ffn_hidden=args.ffn_hidden, vocab=args.vocab)


def _plan(args, overrides: list[str]) -> int:
    model = _shape(args)
    batch, seq, mb, act_bytes = 8, 2048, 1, 2
    if model is None:
        if not (args.module and args.config):
            raise ScheduleError("give --module and --config (torchtitan's "
                                "config registry) or the model's shape")
        config = load_config(args.module, args.config, overrides)
        model = from_config(config, args.config)
        batch = config.training.local_batch_size
        seq = config.training.seq_len
        mb = config.parallelism.pipeline_parallel_microbatch_size
        # torchtitan computes in training.mixed_precision_param, data
        # parallel or not (compute_dtype).
        act_bytes = compute_dtype(config).itemsize
    batch = args.local_batch_size or batch
    seq = args.seq_len or seq
    mb = args.microbatch_size or mb
    hardware = Hardware(flops=args.tflops * 1e12,
                        bandwidth=args.bandwidth * 1e9,
                        memory=args.memory * 1e9,
                        activation_bytes=args.activation_bytes or act_bytes)
    found = plan(model, pp=args.pp, local_batch_size=batch, seq_len=seq,
                 microbatch_size=mb, hardware=hardware, kind=args.kind,
                 activation_checkpoint=args.ac,
                 stages_per_rank=args.stages_per_rank,
                 time_limit=args.time_limit, module=args.module,
                 config=args.config)
    paths = found.write(args.out)
    sys.stdout.write(found.summary())
    if args.verbose:
        for what, step, why in found.candidates:
            shown = "-" if step is None else f"{step:.6g}"
            sys.stdout.write(f"  {what}: {shown}{'  ' + why if why else ''}\n")
    sys.stdout.write(f"wrote {', '.join(paths.values())}\n")
    sys.stdout.write(found.command(os.path.abspath(paths["schedule.csv"]))
                     + "\n")
    return 0


def _check(args) -> int:
    with open(args.csv) as f:
        text = f.read()
    fqns = [part.split(",") for part in args.module_fqns]
    check_run(pp=args.pp, schedule_class=args.schedule_class,
              module_fqns=fqns, local_batch_size=args.local_batch_size,
              microbatch_size=args.microbatch_size,
              activation_checkpoint=args.ac, csv_text=text)
    print(f"{args.csv}: torchtitan can run it ({args.schedule_class}, "
          f"{len(fqns)} stages on {args.pp} ranks)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stagecraft.titan",
        description="Plan a torchtitan pipeline run, or check one. After "
        "`--`, plan passes the rest to torchtitan's config parser (e.g. "
        "-- --training.steps 5).")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="split, schedule and flags for torchtitan")
    p.add_argument("--module", help="torchtitan module, e.g. llama3")
    p.add_argument("--config", help="its config, e.g. llama3_debugmodel")
    for name in ("layers", "dim", "heads", "kv-heads", "ffn-hidden", "vocab"):
        p.add_argument(f"--{name}", type=int,
                       help="model shape, instead of --module/--config")
    p.add_argument("--pp", type=int, required=True, help="pipeline ranks")
    p.add_argument("--local-batch-size", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--microbatch-size", type=int)
    p.add_argument("--kind", default="auto",
                   help="auto (default) or a Stagecraft kind")
    p.add_argument("--ac", choices=["none", "full"],
                   help="activation checkpointing (default: the faster that "
                   "fits)")
    p.add_argument("--stages-per-rank", type=int, nargs="+",
                   help="counts to try (default 1 2)")
    p.add_argument("--memory", type=float, default=80.0,
                   help="device memory, GB (default 80)")
    p.add_argument("--tflops", type=float, default=0.4 * 989,
                   help="achieved TFLOP/s (default 40%% of an H100's bf16)")
    p.add_argument("--bandwidth", type=float, default=3350.0,
                   help="memory bandwidth, GB/s (default 3350)")
    p.add_argument("--activation-bytes", type=int,
                   help="bytes per activation element (default 2; 4 for a "
                   "float32 torchtitan config)")
    p.add_argument("--time-limit", type=float, default=2.0,
                   help="seconds for each auto search")
    p.add_argument("--out", required=True, help="directory to write")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list every candidate weighed")
    c = sub.add_parser("check", help="check a CSV against torchtitan's rules")
    c.add_argument("--csv", required=True)
    c.add_argument("--pp", type=int, required=True)
    c.add_argument("--schedule-class", required=True, choices=CLASSES)
    c.add_argument("--module-fqns", nargs="+", required=True,
                   help="one comma-separated list per stage")
    c.add_argument("--local-batch-size", type=int, required=True)
    c.add_argument("--microbatch-size", type=int, default=1)
    c.add_argument("--ac", default="selective",
                   choices=["none", "full", "selective", "memory-budget"])
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(overrides)]
                             [:-1 if overrides or argv[-1:] == ["--"] else None])
    try:
        return _plan(args, overrides) if args.command == "plan" \
            else _check(args)
    except (ScheduleError, OSError) as error:
        print(f"stagecraft.titan {args.command}: error: {error}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
