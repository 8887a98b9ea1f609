"""stagecraft.titan: plans for torchtitan, torchtitan's rules checked
before launch, and (torchtitan installed) its own trainer running the plan
on 2 CPU processes with the losses of its built-in schedule."""

import json
import os
import subprocess
import sys

import pytest

import stagecraft as sc
from stagecraft import titan

LLAMA_8B = titan.Llm(name="llama3-8b", layers=32, dim=4096, heads=32,
                     kv_heads=8, ffn_hidden=14336, vocab=128256)
DEBUG = titan.Llm(name="llama3_debugmodel", layers=6, dim=256, heads=16,
                  kv_heads=16, ffn_hidden=768, vocab=2048)
HERE = os.path.dirname(os.path.abspath(__file__))


def _modules(plan):
    return [m for names in plan.module_fqns for m in names]


def test_a_plan_covers_the_model_fits_memory_and_runs_in_its_class():
    p = titan.plan(LLAMA_8B, pp=4, local_batch_size=16, seq_len=8192,
                   time_limit=0.5)
    expected = [m for u in LLAMA_8B.module_names() for m in u.split(",")]
    assert _modules(p) == expected
    assert max(p.schedule.peak_memory) <= 80e9
    rank = titan.class_placement(p.schedule_class, 4, len(p.module_fqns))
    assert list(p.schedule.placement) == rank
    p.check()
    flags = p.flags("s.csv")
    assert flags[flags.index("--parallelism.pipeline_parallel_schedule")
                 + 1] == p.schedule_class
    assert flags[-1] == f"activation-checkpoint:{p.activation_checkpoint}"
    at = flags.index("--parallelism.module_fqns_per_model_part") + 1
    assert flags[at:at + len(p.module_fqns)] == [
        ",".join(n) for n in p.module_fqns]
    # No built-in order that fits was faster on the same costs.
    for what, step, why in p.candidates:
        if step is not None and not why:
            assert p.schedule.makespan <= step * (1 + 1e-9), what


def test_the_plan_is_no_slower_than_torchtitans_default_split_and_1f1b():
    hw = titan.Hardware()
    for pp in (4, 8):
        p = titan.plan(LLAMA_8B, pp=pp, local_batch_size=2 * pp,
                       seq_len=8192, hardware=hw, time_limit=0.5)
        units = titan.module_costs(LLAMA_8B, 8192, 1, hw,
                                   p.activation_checkpoint)
        first = titan.default_split(len(units), pp)
        problem = sc.Problem(ranks=pp, microbatches=2 * pp,
                             stages=sc.stages_from_partition(units, first))
        theirs = sc.schedule(problem, "1f1b")
        assert p.schedule.makespan <= theirs.makespan * (1 + 1e-9)


def test_default_split_is_torchtitans():
    pipeline = pytest.importorskip("torchtitan.distributed.pipeline_parallel")
    for layers, stages in ((6, 2), (6, 4), (32, 4), (32, 8), (80, 16),
                           (7, 3)):
        units = ["tok_embeddings"] + [f"layers.{i}" for i in range(layers)] \
            + ["norm,lm_head"]
        first = titan.default_split(len(units), stages)
        ours = [[m for u in units[first[s]:first[s + 1]]
                 for m in u.split(",")] for s in range(stages)]
        assert ours == pipeline._generate_llm_fqn_per_model_part(
            stages, layers, 1, 1)


def _refused(match, **overrides):
    run = dict(pp=2, schedule_class="Interleaved1F1B",
               module_fqns=[["tok_embeddings", "layers.0"], ["layers.1"],
                            ["layers.2"], ["layers.3", "norm", "lm_head"]],
               local_batch_size=4, microbatch_size=1,
               activation_checkpoint="none",
               csv_text="0F0,0F1,0F2,0F3,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n")
    run.update(overrides)
    with pytest.raises(sc.ScheduleError, match=match):
        titan.check_run(**run)


def test_what_torchtitan_cannot_run_is_refused_naming_why():
    _refused("places one stage per rank", schedule_class="1F1B", csv_text=None)
    _refused("V, two per rank", schedule_class="ZBVZeroBubble",
             module_fqns=[["tok_embeddings"], ["layers.0"], ["layers.1"],
                          ["layers.2"], ["layers.3"], ["norm", "lm_head"]],
             pp=2, csv_text=None)
    _refused("not divisible by pipeline_parallel_microbatch_size 3",
             microbatch_size=3, csv_text=None)
    _refused("splits the backward.*selective",
             activation_checkpoint="selective",
             csv_text="0F0,0I0,0W0\n1F0,1I0,1W0\n",
             module_fqns=[["tok_embeddings", "layers.0"],
                          ["layers.1", "norm", "lm_head"]],
             schedule_class="1F1B", local_batch_size=1)
    _refused("compute-only", csv_text="0F0,SEND_F0\n1F0\n")
    _refused("runs stage 2, which ZBVZeroBubble places on rank 1",
             schedule_class="ZBVZeroBubble")
    _refused("runs 1 microbatches.*= 4",
             csv_text="0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n")
    _refused("stage 1 holds no module",
             module_fqns=[["tok_embeddings"], [], ["layers.0"], ["norm"]],
             csv_text=None)
    # The plan's own CSV and flags pass.
    titan.check_run(pp=2, schedule_class="Interleaved1F1B",
                    module_fqns=[["a"], ["b"], ["c"], ["d"]],
                    local_batch_size=1, microbatch_size=1,
                    activation_checkpoint="none",
                    csv_text="0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "stagecraft.titan", *args],
                          capture_output=True, text=True, timeout=300)


def test_the_cli_writes_the_plan_and_checks_a_csv(tmp_path):
    out = tmp_path / "plan"
    shape = ["--layers", "6", "--dim", "256", "--heads", "16",
             "--ffn-hidden", "768", "--vocab", "2048"]
    done = _cli("plan", *shape, "--pp", "2", "--local-batch-size", "8",
                "--seq-len", "256", "--time-limit", "0.2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    for name in ("schedule.csv", "plan.json", "command.sh", "summary.txt"):
        assert (out / name).is_file()
    command = (out / "command.sh").read_text().splitlines()[-1]
    assert "torchrun --nproc_per_node 2 -m torchtitan.train" in command
    assert f"--parallelism.pipeline_parallel_schedule_csv {out}" \
        "/schedule.csv" in command
    loaded = sc.load_plan(str(out / "plan.json"))
    assert loaded.to_csv() == (out / "schedule.csv").read_text()
    flags = command.split()
    fqns = flags[flags.index("--parallelism.module_fqns_per_model_part")
                 + 1:flags.index(
                     "--parallelism.pipeline_parallel_microbatch_size")]
    klass = flags[flags.index("--parallelism.pipeline_parallel_schedule")
                  + 1]
    check = ["check", "--csv", str(out / "schedule.csv"), "--pp", "2",
             "--schedule-class", klass, "--module-fqns", *fqns,
             "--local-batch-size", "8"]
    ok = _cli(*check, "--ac", flags[-2].split(":")[1])
    assert ok.returncode == 0, ok.stderr
    assert "torchtitan can run it" in ok.stdout
    wrong = "ZBVZeroBubble" if klass != "ZBVZeroBubble" else "Interleaved1F1B"
    bad = _cli(*check[:6], wrong, *check[7:])
    assert bad.returncode == 1 and "which " + wrong + " places" in bad.stderr
    none = _cli("plan", "--pp", "2", "--out", str(out))
    assert none.returncode == 1 and "--module and --config" in none.stderr


_PROFILE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import titan_cpu
from stagecraft import titan
torch.set_num_threads(1)
titan_cpu._install()
out = {}
for dtype in ("bfloat16", "float32"):
    config = titan.load_config("llama3", "llama3_debugmodel", [
        "--hf_assets_path", sys.argv[2],
        "--training.mixed_precision_param", dtype])
    model = titan.build_model(config)
    llm = titan.from_config(config, "llama3_debugmodel")
    units = titan.profile(model, llm, 64, 1, titan.Hardware(), repeats=1,
                          warmup=1, loss_fn=titan.build_loss(config, model))
    out[dtype] = {
        "compute": str(titan.compute_dtype(config)),
        "params": sorted({str(p.dtype) for p in model.parameters()}),
        "buffers": sorted({str(b.dtype) for b in model.buffers()}),
        "units": [[u.name, u.forward, u.backward_input, u.backward_weight,
                   u.activation] for u in units]}
print(json.dumps(out))
"""


def test_the_profile_runs_in_the_dtype_torchtitan_computes_in(tmp_path):
    """torchtitan computes in training.mixed_precision_param (bf16 by
    default), pipelining alone or not: build_model casts the parameters to
    it (not the rotary buffer), and profile then measures that run, whose
    block activations take about half the fp32 bytes."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("tokenizers")
    sys.path.insert(0, HERE)
    from titan_cpu import make_assets
    assets = make_assets(str(tmp_path / "assets"), documents=40)
    done = subprocess.run([sys.executable, "-c", _PROFILE, HERE,
                           assets["tokenizer"]], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    bf16, fp32 = got["bfloat16"], got["float32"]
    assert bf16["compute"] == "torch.bfloat16"
    assert bf16["params"] == ["torch.bfloat16"]
    assert fp32["params"] == ["torch.float32"]
    assert bf16["buffers"] == fp32["buffers"]
    names = [u[0] for u in fp32["units"]]
    assert names == DEBUG.module_names()
    for unit in bf16["units"] + fp32["units"]:
        assert all(v >= 0 for v in unit[1:4]) and unit[1] > 0, unit
    block16, block32 = bf16["units"][1][4], fp32["units"][1][4]
    # 0.59 measured: the norms and softmax keep some fp32 tensors.
    assert 0.45 < block16 / block32 < 0.7, (block16, block32)


def _titan_run(workdir, assets, extra, log):
    env = dict(os.environ, TITAN_CPU_LOG=str(log),
               TORCHINDUCTOR_CACHE_DIR=str(workdir / "inductor"),
               OMP_NUM_THREADS="1")
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", "2", os.path.join(HERE, "titan_cpu.py"),
            "--module", "llama3", "--config", "llama3_debugmodel",
            "--hf_assets_path", assets["tokenizer"],
            "--dataloader.dataset_path", assets["corpus"],
            "--training.steps", "5", "--debug.seed", "42",
            "--debug.deterministic", "--checkpoint.no-enable",
            "--validator.no-enable", "--dump_folder", str(workdir / "dump"),
            # fp32 compute: with pipelining alone torchtitan still installs
            # FSDP's bf16 mixed precision (shard degree 1), and on a CPU
            # without bf16 matrix instructions (AMD EPYC here) a bf16 GEMM
            # runs torch's reference loop: 17 s a step instead of under 2.
            "--training.mixed_precision_param", "float32",
            *extra]
    done = subprocess.run(args, cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    losses = {}
    for rank in (0, 1):
        with open(f"{log}.{rank}") as f:
            for line in f:
                row = json.loads(line)
                if row["loss"] != -1.0:
                    losses[row["step"]] = row["loss"]
    return [losses[s] for s in sorted(losses)]


def test_torchtitan_runs_the_plan_with_its_own_schedules_losses(tmp_path):
    """torchtitan (PyPI) trains the debug model 5 steps on 2 CPU processes
    (the harness in titan_cpu.py): Stagecraft's plan of kind 1f1b, its CSV
    and flags as `python -m stagecraft.titan plan` writes them, against
    torchtitan's built-in 1F1B on the same split: equal losses."""
    pytest.importorskip("torchtitan")
    pytest.importorskip("tokenizers")
    sys.path.insert(0, HERE)
    from titan_cpu import make_assets
    assets = make_assets(str(tmp_path / "assets"))
    out = tmp_path / "plan"
    done = _cli("plan", "--module", "llama3", "--config",
                "llama3_debugmodel", "--pp", "2", "--seq-len", "256",
                "--kind", "1f1b", "--stages-per-rank", "1",
                "--activation-bytes", "4", "--out", str(out), "--",
                "--hf_assets_path", assets["tokenizer"])
    assert done.returncode == 0, done.stderr
    flags = (out / "command.sh").read_text().splitlines()[-1].split()
    flags = flags[flags.index("--parallelism.pipeline_parallel_degree"):-1]
    ours = _titan_run(tmp_path, assets, flags, tmp_path / "ours")
    csv_at = flags.index("--parallelism.pipeline_parallel_schedule_csv")
    builtin = flags[:csv_at] + flags[csv_at + 2:]
    theirs = _titan_run(tmp_path, assets, builtin, tmp_path / "theirs")
    assert len(ours) == 5 and ours[0] > ours[-1]
    assert ours == pytest.approx(theirs, rel=1e-6, abs=0)
    # torchtitan ran the CSV's order on each rank, as written.
    rows = (out / "schedule.csv").read_text().splitlines()
    for rank in (0, 1):
        with open(tmp_path / f"ours.{rank}.order") as f:
            assert json.load(f) == rows[rank].split(",")
        assert not (tmp_path / f"theirs.{rank}.order").exists()
