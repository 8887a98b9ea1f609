"""stagecraft.torch on torch's own pipeline runtime: multi-process gloo on
the CPU (world sizes 2 and 4), every kind equal to the unpipelined model and
to torch's own schedule of the kind; bad input refused before any
communication; profile -> auto -> run; torch's schedules checked. Every
launch is bounded by a timeout."""

import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import stagecraft as sc  # noqa: E402
import stagecraft.torch as sct  # noqa: E402
from torch.distributed.pipelining import schedules as ts  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_worker.py")
TIMEOUT_S = 240


def launch(tmp_path, mode, kind, world, n_mb=8, **env_vars):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", **env_vars)
    procs = [subprocess.Popen(
        [sys.executable, WORKER, mode, kind, str(r), str(world), str(port),
         str(tmp_path), str(n_mb)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for r in range(world)]
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=TIMEOUT_S)
            outputs.append(out)
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"{mode} {kind} on {world} ranks ran past {TIMEOUT_S} s")
    failed = [r for r, p in enumerate(procs) if p.returncode != 0]
    assert not failed, "\n".join(
        f"rank {r} (exit {procs[r].returncode}):\n{outputs[r][-2500:]}"
        for r in failed)
    return [json.load(open(tmp_path / f"rank{r}.json")) for r in range(world)]


@pytest.mark.parametrize("lowering", ["stagecraft", "early"])
@pytest.mark.parametrize("kind", sct.KINDS)
def test_every_lowering_of_every_kind_equals_the_unpipelined_model(
        tmp_path, kind, lowering):
    # lowering="stagecraft": the communication Stagecraft lowered and
    # verified with the plan; "early": torch's lowering with every receive
    # posted as early as it may be (the default is torch's own lowering).
    results = launch(tmp_path, f"{lowering}-lowering", kind, 2)
    for r, res in enumerate(results):
        assert res["grad_err"] <= 1e-5, (r, res)
        assert res["loss_err"] <= 1e-5, (r, res)


@pytest.mark.parametrize("mode,kind", [
    ("quiet-transport", k) for k in ("gpipe", "1f1b", "interleaved-1f1b",
                                     "zb-v", "dualpipev")] + [
    ("quiet-single-stage", k) for k in ("gpipe", "1f1b")])
def test_quiet_transport_runs_gloo_at_idle_priority_during_the_step_only(
        tmp_path, mode, kind):
    # transport="quiet": gloo's transport threads run at SCHED_IDLE while
    # a step computes (seen from inside every forward), back at their own
    # policy after it, and the step trains exactly as the unpipelined
    # model: on the multi-stage runtime with early receives (1F1B's order
    # too), and on Stagecraft's subclasses of torch's single-stage GPipe
    # and 1F1B (lowering="torch"), which equal torch's own class.
    results = launch(tmp_path, mode, kind, 2)
    for r, res in enumerate(results):
        if mode == "quiet-single-stage":
            assert res["runner"] == {"gpipe": "_StagecraftGPipe",
                                     "1f1b": "_Stagecraft1F1B"}[kind], res
            assert res["torch_err"] <= 1e-6, (r, res)
        else:
            assert res["runner"] == "_StagecraftRuntime", res
        assert res["kept"][1] == "quiet", (r, res)
        assert res["transport_threads"] >= 1, (r, res)
        policies = res["policies"]
        assert policies["before"] == [os.SCHED_OTHER], (r, policies)
        assert policies["during"] == [os.SCHED_IDLE], (r, policies)
        assert policies["after"] == policies["before"], (r, policies)
        assert res["grad_err"] <= 1e-5, (r, res)
        assert res["loss_err"] <= 1e-5, (r, res)


def test_ranks_agree_on_the_transport_when_one_may_not_quiet(tmp_path):
    # One rank may not restore its transport threads' priority: every rank
    # runs the same trial without the quiet candidates, and an explicit
    # transport="quiet" fails on every rank with one message (none hangs
    # waiting for the other).
    results = launch(tmp_path, "transport-agreement",
                     "dualpipev", 2, n_mb=4)
    for r, res in enumerate(results):
        assert res["candidates"] == ["early", "torch"], (r, res)
        assert res["kept"][0] in ("early", "torch"), (r, res)
        assert res["kept"][1] == "shared", (r, res)
    assert results[0]["quiet"] == (
        "transport='quiet': another rank of the pipeline cannot quiet its "
        "own; use transport='shared'")
    assert results[1]["quiet"].startswith(
        "transport='quiet': this process may not restore its gloo "
        "transport threads' priority"), results[1]


def test_transport_choices_and_what_quiet_needs():
    from stagecraft.torch import _transport as tt
    with pytest.raises(sc.ScheduleError, match="transport='loud': expected "
                       "one of 'auto', 'quiet', 'shared'"):
        sct._trial._transports("loud", None)
    # No gloo transport thread here (no process group): "auto" is
    # "shared", and "quiet" says why it cannot run.
    blocker = sct._trial._quiet_blocker([], None)
    assert blocker == "this process has no gloo transport thread to quiet"
    assert sct._trial._transports("auto", blocker) == ["shared"]
    assert sct._trial._transports("shared", blocker) == ["shared"]
    with pytest.raises(sc.ScheduleError, match="transport='quiet': this "
                       "process has no gloo transport thread to quiet; use "
                       "transport='shared'"):
        sct._trial._transports("quiet", blocker)
    assert sct._trial._transports("auto", None) == ["shared", "quiet"]
    assert sct._trial._transports("quiet", None) == ["quiet"]
    # A thread of this process at SCHED_IDLE inside the block only.
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        tid = t.native_id
        assert tt.restorable([tid])  # (the tests run as root)
        assert sct._trial._quiet_blocker([tid], None) is None
        before = os.sched_getscheduler(tid)
        with tt.quiet([tid]):
            assert os.sched_getscheduler(tid) == os.SCHED_IDLE
        assert os.sched_getscheduler(tid) == before
        with pytest.raises(RuntimeError):
            with tt.quiet([tid]):
                raise RuntimeError("a failed step")
        assert os.sched_getscheduler(tid) == before
    finally:
        stop.set()
        t.join()
    # A thread that ended is skipped.
    with tt.quiet([tid]):
        pass


@pytest.mark.parametrize("kind", ["1f1b", "zb-h2", "zb-v", "dualpipev"])
def test_plans_that_take_microbatches_out_of_order_train_exactly(
        tmp_path, kind):
    # torch's runtime reads microbatch k's loss at index k of the losses in
    # the order the forwards ran, and its stages match messages in the
    # order posted: a plan whose stages take the microbatches out of order
    # must still train exactly, under every lowering that can run it.
    results = launch(tmp_path, "out-of-order", kind, 2)
    for r, res in enumerate(results):
        for lowering in sct.LOWERINGS:
            got = res[lowering]
            assert got["grad_err"] <= 1e-5, (r, lowering, got)
            assert got["loss_err"] <= 1e-5, (r, lowering, got)
            got = res[f"swapped {lowering}"]
            assert "error" not in got, (r, lowering, got)
            assert got["grad_err"] <= 1e-5, (r, lowering, got)
            assert got["loss_err"] <= 1e-5, (r, lowering, got)
    # One loss per microbatch, reported by the last stage's rank.
    for lowering in sct.LOWERINGS:
        assert sum(res[lowering]["losses"] for res in results) == 8
        assert sum(res[f"swapped {lowering}"]["losses"]
                   for res in results) == 8


def test_a_message_paired_with_the_wrong_receive_is_found():
    # The guard every lowered order passes: one rank's sends to another in
    # the order that rank posts its receives from it.
    A = ts._Action.from_str
    sends = [A("0F0"), A("0SEND_F0"), A("0F1"), A("0SEND_F1")]
    right = {0: sends, 1: [A("1RECV_F0"), A("1RECV_F1"), A("1F1"),
                           A("1F0")]}
    assert sct._lower._message_order_mismatch(right, [0, 1]) is None
    wrong = {0: sends, 1: [A("1RECV_F1"), A("1F1"), A("1RECV_F0"),
                           A("1F0")]}
    assert sct._lower._message_order_mismatch(wrong, [0, 1]) == (
        "rank 0's message 0 to rank 1 is the 0F0 output, but rank 1's "
        "receive 0 from rank 0 waits for the 0F1 output")
    grads = {1: [A("1B1"), A("1SEND_B1"), A("1B0"), A("1SEND_B0")],
             0: [A("0RECV_B0"), A("0RECV_B1"), A("0B1"), A("0B0")]}
    assert "1's input gradient of microbatch 1, but" in \
        sct._lower._message_order_mismatch(grads, [0, 1])


def assert_equal_to_unpipelined(results, n_mb=8):
    """Every rank's gradients and losses equal the unpipelined model's and
    torch's own schedule's within 1e-5; one loss per microbatch."""
    for r, res in enumerate(results):
        assert res["grad_err"] <= 1e-5, (r, res)
        assert res["loss_err"] <= 1e-5, (r, res)
        if res["torch_err"] is not None:
            assert res["torch_err"] <= 1e-5, (r, res)
    # The last stage's rank reports one loss per microbatch.
    assert sum(res["losses"] for res in results) == n_mb


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("kind", sct.KINDS)
def test_every_kind_equals_the_unpipelined_model_and_torch(tmp_path, kind, world):
    assert_equal_to_unpipelined(launch(tmp_path, "equal", kind, world))


@pytest.mark.parametrize("mode,kind", [
    ("ddp", "1f1b"), ("ddp-stagecraft", "zb-v"), ("fsdp", "zb-h1"),
    ("fsdp-stagecraft", "dp-auto")])
def test_a_pipeline_inside_data_parallelism_equals_the_data_parallel_model(
        tmp_path, mode, kind):
    # 2 replicas of a 2-rank pipeline, each stage in DDP or FSDP2 over its
    # data-parallel group: every rank's gradients are those of the
    # unpipelined model over both replicas' microbatches, so a reduction
    # missing (DDP under a split backward, as torch leaves it) fails here.
    # "-stagecraft": torch's runtime runs Stagecraft's gradient cells;
    # "dp-auto": the plan chosen with its reductions (sct.plan's
    # data_parallel), each stage's reduced whole after its last gradient.
    results = launch(tmp_path, mode, kind, 4, n_mb=4)
    for r, res in enumerate(results):
        assert res["grad_err"] <= 1e-5, (r, res)
        assert res["loss_err"] <= 1e-5, (r, res)
        assert res["replica"] == r // 2 and res["wrapped"] in (
            "DistributedDataParallel", "FSDPStageModule"), res
        if mode == "fsdp-stagecraft":
            assert res["cells"] == ["REDUCE_GRAD", "RESHARD", "UNSHARD",
                                    "WAIT_REDUCE_GRAD"], res
        elif mode == "ddp-stagecraft":
            assert res["cells"] == ["REDUCE_GRAD", "WAIT_REDUCE_GRAD"], res
        if kind == "dp-auto":
            assert res["kind"] == "data-parallel", res
            assert res["choice"].endswith("; torch"), res
    assert sum(res["losses"] for res in results) == 2 * 4


@pytest.mark.parametrize("kind", ["1f1b", "zb-h1", "zb-v"])
def test_full_recomputation_runs_under_checkpoint_and_stays_equal(tmp_path,
                                                                  kind):
    results = launch(tmp_path, "recompute", kind, 2)
    for r, res in enumerate(results):
        assert res["grad_err"] <= 1e-5, (r, res)
        assert res["loss_err"] <= 1e-5, (r, res)
        if res["torch_err"] is not None:
            assert res["torch_err"] <= 1e-5, (r, res)
        # Every stage of the rank runs under torch.utils.checkpoint.
        assert res["checkpointed"] == sorted(res["checkpointed"]) and \
            len(res["checkpointed"]) >= 1, res


def test_plan_inside_data_parallelism_places_whole_reductions():
    # A reduction that costs a stage's work: the plan minimizes the step
    # with it and places each stage's whole (torch's REDUCE_GRAD); the
    # search's own properties are the scheduler's unit tests
    # (DataParallel.WholeReductionsOnlyWhenBucketsAreOff).
    problem = sc.Problem(ranks=2, microbatches=4,
                         stages=[sc.Stage() for _ in range(4)])
    dp = dict(degree=4, grad_bytes=[2.0] * 4, latency=0.01)
    plan = sct.plan(problem, data_parallel=dp, time_limit=0.5)
    assert plan.kind == "data-parallel" and plan.choice.endswith("; torch")
    whole = sc.plan_data_parallel(problem, **dp, time_limit=0.5,
                                  buckets=False)
    assert whole["placement"] == "torch"
    for bad, message in [
            (dict(degree=4), "data_parallel needs grad_bytes"),
            (dict(degree=4, grad_bytes=[1.0] * 4, buckets=True),
             "unknown key(s) buckets"),
            ([4], "data_parallel must be a dict")]:
        with pytest.raises(sc.ScheduleError, match=re.escape(message)):
            sct.plan(problem, data_parallel=bad)
    with pytest.raises(sc.ScheduleError, match="a fixed kind places them by "
                                               "torch's rule"):
        sct.plan(problem, kind="1f1b", data_parallel=dp)


def test_a_per_microbatch_mix_is_refused_for_torch():
    stages = [sc.Stage(activation=2.0, weight_grad=1.0, recomputed=0.1,
                       params=1.0) for _ in range(2)]
    problem = sc.Problem(ranks=2, microbatches=4, stages=stages, capacity=4.0)
    mixed = sc.schedule(problem, kind="1f1b")
    assert any("full" in row and "none" in row for row in mixed.recompute)
    with pytest.raises(sc.ScheduleError, match="recomputes microbatches .* "
                       "and keeps the others; torch's runtime runs one module "
                       "for every microbatch"):
        sct.recomputed_stages(mixed)
    full = sc.schedule(problem, kind="1f1b", recompute="full")
    assert sct.recomputed_stages(full) == [0, 1]
    none = sc.schedule(sc.Problem(ranks=2, microbatches=4, stages=stages),
                       kind="1f1b")
    assert sct.recomputed_stages(none) == []


def test_bad_input_raises_before_any_communication(tmp_path):
    results = launch(tmp_path, "errors", "zb-v", 2)
    for res in results:
        assert "helix moves attention to other ranks" in res["kind"]
        assert "unknown kind '2f2b'" in res["unknown"]
        assert "but the zb-v plan places" in res["wrong rank"]
        assert "9 microbatches" in res["microbatches"] or \
            "n_microbatches=9" in res["microbatches"]
        assert "num_stages=2" in res["stage count"]
        assert "communication deadlocks: ranks 0, 1 wait forever; cycle 0 -> 1 -> 0" \
            in res["hang"]


def test_profile_then_auto_then_run(tmp_path):
    results = launch(tmp_path, "profile", "auto", 2)
    first = results[0]
    assert all(res["costs"] == first["costs"] for res in results)
    assert all(res["placement"] == first["placement"] for res in results)
    # Every rank's plan is auto's, named as rank 0 found it (it travels as
    # CSV, which alone would read back as kind "csv" with no choice).
    assert all(res["kind"] == "auto" for res in results)
    assert first["choice"] and all(res["choice"] == first["choice"]
                                   for res in results)
    # F, I, W and activation are all measured above zero (I of the first
    # stage too: torch runs nothing there, and that is still a timed run).
    assert all(x > 0 for c in first["costs"] for x in c[:4])
    # Each rank's own stages come with their spread: F, I, W and the fused
    # B, min <= median <= max.
    for res in results:
        assert len(res["spread"]) == 2
        for figures in res["spread"].values():
            assert sorted(figures) == ["B", "F", "I", "W"]
            for median, low, high in figures.values():
                assert 0 < low <= median <= high
    for res in results:
        assert res["grad_err"] <= 1e-5
    losses = [l for res in results for l in res["losses"]]
    assert losses == pytest.approx(first["ref_losses"] if first["losses"]
                                   else results[-1]["ref_losses"], rel=1e-5)
    # The link between the ranks, measured (one node: intra = inter), and
    # each stage's output in MiB: B x T x D floats, the last stage's B x T
    # x V logits.
    node, intra, inter = first["links"]
    assert node == 2 and intra == inter and first["latency"] == intra[0]
    assert intra[0] >= 0 and intra[1] > 0
    assert all(res["links"] == first["links"] for res in results)
    assert first["outputs"] == [2 * 16 * 32 * 4 / 2**20] * 3 + [
        2 * 16 * 64 * 4 / 2**20]
    path = tmp_path / "profiled.mlir"
    path.write_text(first["mlir"])
    loaded = sc.load(str(path))
    assert len(loaded.stages) == 4
    assert tuple(map(list, loaded.links[1:])) == tuple(
        map(list, first["links"][1:]))


def test_check_reads_torchs_own_schedules():
    from torch.distributed.pipelining import schedules as ts
    for cls, ranks, n_mb in [(ts.ScheduleInterleaved1F1B, 2, 4),
                             (ts.ScheduleZBVZeroBubble, 2, 4),
                             (ts.ScheduleDualPipeV, 2, 6),
                             (ts.ScheduleInterleavedZeroBubble, 2, 4)]:
        stages = [FakeStage(i, 2 * ranks, 0, ranks) for i in
                  ([0, 3] if cls in (ts.ScheduleZBVZeroBubble, ts.ScheduleDualPipeV)
                   else [0, 2])]
        theirs = cls(stages, n_mb)
        checked = sct.check(theirs)
        assert checked.makespan > 0
        assert checked.num_ranks == ranks
    # The single-stage classes' orders end with REDUCE_GRAD and
    # WAIT_REDUCE_GRAD, which are not compute: check skips them.
    gpipe = sct.check(ts.ScheduleGPipe(FakeStage(0, 2, 0, 2), 4))
    assert gpipe.actions(0) == ["0F0", "0F1", "0F2", "0F3", "0B0", "0B1",
                                "0B2", "0B3"]
    assert gpipe.makespan == sc.schedule(
        sct._check._uniform_problem(2, 2, 4), kind="gpipe").makespan
    # Read as their step loop runs them: torch's own pipeline_order of
    # 1F1B on rank 1 of 2 with 8 microbatches names 1F1 ... 1F8.
    one = sct.check(ts.Schedule1F1B(FakeStage(1, 2, 1, 2), 8))
    assert one.actions(1)[:4] == ["1F0", "1B0", "1F1", "1B1"]
    assert one.makespan == sc.schedule(
        sct._check._uniform_problem(2, 2, 8), kind="1f1b").makespan
    # Stagecraft's runner of that class (a subclass of it) reads the same.
    stage = FakeStage(1, 2, 1, 2)
    stage.group, stage.device = None, torch.device("cpu")
    plan = sct.plan(sct._check._uniform_problem(2, 2, 8), kind="1f1b")
    ours = sct._runner._Stagecraft1F1B(stage, 8, None, plan, True)
    assert ours.stagecraft_transport == "shared"
    assert sct.check(ours).actions(1) == one.actions(1)


#: What torch's schedule constructors read of a stage, without a process
#: group: the stub `torch_orders` builds torch's orders with.
FakeStage = sct._plan._OrderStage


@pytest.mark.parametrize("kind", sct.KINDS)
@pytest.mark.parametrize("comms", [False, True])
def test_torchs_csv_loader_accepts_every_kind(tmp_path, kind, comms):
    from torch.distributed.pipelining import schedules as ts
    ranks, n_mb = 4, 8
    num_stages = 2 * ranks
    problem = sc.Problem(ranks=ranks, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = sc.schedule(problem, kind=kind, time_limit=0.5)
    path = tmp_path / "schedule.csv"
    path.write_text(plan.to_csv(comms=comms))
    stages = [FakeStage(i, num_stages, 0, ranks)
              for i in sct.stage_indices(plan, 0)]
    runtime = ts._PipelineScheduleRuntime(stages, n_mb)
    runtime._load_csv(str(path), format="compute_comms" if comms else "compute_only")
    assert runtime.stage_index_to_group_rank == dict(enumerate(plan.placement))
    if comms:
        # torch runs exactly the cells Stagecraft wrote, in order.
        rows = plan.to_csv(comms=True).strip().split("\n")
        for r in range(ranks):
            assert [str(a) for a in runtime.pipeline_order_with_comms[r]] == \
                rows[r].split(",")
    else:
        for r in range(ranks):
            assert [str(a) for a in runtime.pipeline_order[r]] == plan.actions(r)


@pytest.mark.parametrize("kind", ["1f1b", "interleaved-1f1b", "zb-v"])
@pytest.mark.parametrize("sharded", [False, True])
def test_torchs_runtime_accepts_stagecraft_gradient_cells(kind, sharded):
    from torch.distributed.pipelining import schedules as ts
    ranks, n_mb = 4, 8
    num_stages = 2 * ranks
    problem = sc.Problem(ranks=ranks, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = sc.schedule(problem, kind=kind, time_limit=0.5)
    text = plan.to_csv(comms=True, reduce_grad=True, sharded=sharded)
    rows = text.strip().split("\n")
    for r in range(ranks):
        cells = rows[r].split(",")
        mine = sct.stage_indices(plan, r)
        # One reduction per stage, after its last gradient action; its wait
        # before the rank's next reduction or at the row's end.
        reduces = [c for c in cells if c.endswith("REDUCE_GRAD")
                   and "WAIT" not in c]
        assert sorted(reduces) == sorted(f"{s}REDUCE_GRAD" for s in mine)
        for s in mine:
            at = cells.index(f"{s}REDUCE_GRAD")
            last = max(i for i, c in enumerate(cells)
                       if re.fullmatch(f"{s}[WB][0-9]+", c))
            # Only the previous reduction's wait (and reshard) between.
            assert at > last and all(
                re.fullmatch("[0-9]+(WAIT_REDUCE_GRAD|RESHARD)", c)
                for c in cells[last + 1:at]), (r, s, cells)
        assert (sum(c.endswith("UNSHARD") for c in cells) == len(mine)) \
            == sharded
    stages = [FakeStage(i, num_stages, 0, ranks)
              for i in sct.stage_indices(plan, 0)]
    runtime = ts._PipelineScheduleRuntime(stages, n_mb)
    # torch's own check: each REDUCE_GRAD waited for, one pending a rank.
    runtime._prepare_schedule_with_comms(
        {r: [ts._Action.from_str(c) for c in rows[r].split(",")]
         for r in range(ranks)}, format="compute_comms")
    # Read back, the cells are skipped: the same schedule.
    again = sc.from_csv(problem, text)
    assert [again.actions(r) for r in range(ranks)] == \
        [plan.actions(r) for r in range(ranks)]
    with pytest.raises(sc.ScheduleError, match="need comms=True"):
        plan.to_csv(reduce_grad=True)
    with pytest.raises(sc.ScheduleError, match="needs reduce_grad=True"):
        plan.to_csv(comms=True, sharded=True)


def test_a_branching_pipeline_is_refused():
    # torch's pipelining passes one tensor from each stage to the next.
    stages = [sc.Stage(name=n) for n in ("a", "b", "c")]
    stages[2].inputs = [0, 1]
    stages[1].inputs = []
    p = sc.Problem(ranks=3, microbatches=3, stages=stages)
    with pytest.raises(sc.ScheduleError, match="cannot run a graph of stages"):
        sct.plan(p, kind="1f1b")


def test_torch_plans_for_the_makespan_and_says_so():
    # torch steps the optimizer after the whole schedule: a barrier between
    # steps, so the span objective (overlapped steps) does not apply.
    p = sc.Problem(ranks=2, microbatches=4,
                   stages=[sc.Stage(name=f"s{i}") for i in range(2)])
    with pytest.raises(sc.ScheduleError, match="a barrier between steps"):
        sct.plan(p, kind="zb-h1", objective="span")
    assert sct.plan(p, kind="zb-h1").kind == "zb-h1"


def test_plans_nobody_chose_by_hand_equal_the_unpipelined_model(tmp_path):
    # 20 seeded problems with random uneven F, I, W and memory, planned by
    # auto (under a random limit between 1x and 2x 1F1B's peak) and by every
    # kind, on 4 processes. A failing plan's CSV stays in tmp_path.
    results = launch(tmp_path, "differential", "20", 4)
    rows = results[0]
    assert len(rows) == 20 * len(sct.KINDS)
    for r, res in enumerate(results):
        bad = [row for row in res
               if row["grad_err"] > 1e-5 or row["loss_err"] > 1e-5]
        assert not bad, (r, bad, tmp_path)


@pytest.mark.parametrize("kind", ["dualpipev", "gpipe"])
def test_auto_lowering_keeps_the_lowering_measured_faster(tmp_path, kind):
    # lowering="auto" on the multi-stage runtime tries "early" and "torch"
    # (TRIAL_WARMUP uncounted steps each, then TRIAL_ROUNDS blocks of
    # TRIAL_BLOCK steps each) and every rank keeps
    # the one whose slowest rank's median step is the shorter. Slowing one
    # lowering on the last rank alone moves every rank's choice; every step
    # trains, and after the trial the kept lowering still equals the
    # unpipelined model.
    # On gloo (here, as root) each lowering runs with gloo's transport
    # threads as torch leaves them and quiet (`transport="auto"`): four
    # candidates, twice TRIAL_LENGTH steps.
    results = launch(tmp_path, "lowering-trial", kind, 2, n_mb=4)
    names = {"early", "torch", "early+quiet", "torch+quiet"}
    trial = 2 * sct.TRIAL_LENGTH
    for slow, other in ((None, None), ("early", "torch"), ("torch", "early")):
        runs = [res[str(slow)] for res in results]
        kept, transports = runs[0]["kept"], runs[0]["transports"]
        for run in runs:
            assert run["kept"] == kept, (slow, runs)
            assert run["transports"] == transports, (slow, runs)
            assert run["grad_err"] <= 1e-5, (slow, run)
            assert run["ms"] == runs[0]["ms"], (slow, runs)
        assert kept[:trial] == [None] * trial, (slow, kept)
        assert transports[:trial] == [None] * trial, (slow, transports)
        assert kept[trial] in ("early", "torch") and len(set(kept[trial:])) == 1
        assert transports[trial] in ("shared", "quiet")
        assert len(set(transports[trial:])) == 1
        ms = runs[0]["ms"]
        assert set(ms) == names
        fastest = min(ms, key=ms.get)
        assert fastest == kept[trial] + (
            "+quiet" if transports[trial] == "quiet" else ""), (ms, kept)
        if slow is not None:
            assert kept[trial] == other, (slow, ms)
            assert ms[slow] >= 1000.0 and ms[slow + "+quiet"] >= 1000.0, ms


def test_single_stage_class_keeps_the_transport_measured_faster(tmp_path):
    # 1F1B's order runs on torch's Schedule1F1B (Stagecraft's subclass of
    # it), whose trial tries gloo's transport shared and quiet
    # (TRIAL_LENGTH steps) and keeps the faster on every rank; slowing one
    # transport on the last rank alone moves every rank's choice, and the
    # kept one trains equal to the unpipelined model.
    results = launch(tmp_path, "lowering-trial", "1f1b", 2, n_mb=4)
    trial = sct.TRIAL_LENGTH
    for slow, other in ((None, None), ("shared", "quiet"),
                        ("quiet", "shared")):
        runs = [res[str(slow)] for res in results]
        for run in runs:
            assert run["runner"] == "_Stagecraft1F1B", run
            assert run["kept"] == [None] * trial + ["torch"], (slow, run)
            assert run["transports"] == runs[0]["transports"], (slow, runs)
            assert run["grad_err"] <= 1e-5, (slow, run)
        transports = runs[0]["transports"]
        assert transports[:trial] == [None] * trial, (slow, transports)
        assert transports[trial] == transports[-1], (slow, transports)
        ms = runs[0]["ms"]
        assert set(ms) == {"torch", "torch+quiet"}, ms
        assert ("torch+quiet" if transports[trial] == "quiet" else "torch") \
            == min(ms, key=ms.get), (ms, transports)
        if slow is not None:
            assert transports[trial] == other, (slow, ms)


def test_idle_profiler_scopes_are_skipped_and_a_profiler_still_sees_them(
        tmp_path):
    # torch's multi-stage runtime opens a record_function scope around
    # every action; Stagecraft's runner skips them while no profiler runs
    # (they cost about 10 us an action) and keeps them under
    # torch.profiler, whose trace then names every action ("PP:0F0", ...).
    results = launch(tmp_path, "scopes", "gpipe", 2, n_mb=4)
    for r, res in enumerate(results):
        assert res["idle"] == 0, (r, res)
        assert res["profiled"] > 0 and res["restored"], (r, res)
        for k in range(4):
            assert {f"PP:{r}F{k}", f"PP:{r}B{k}"} <= set(res["recorded"]), (
                r, res)


def test_auto_lowering_trial_order_and_choice():
    # Single warm-up steps in turn, then blocks of consecutive steps of
    # each candidate, the order reversed every round; neither the warm-up
    # nor a block's first step (which pays for the other candidate's step
    # before it) is counted; a tie keeps the first tried.
    trial = sct._trial._LoweringTrial(["early", "torch"], rounds=2, block=3,
                               warmup=1)
    seen = []
    while not trial.finished():
        name = trial.next()
        seen.append(name)
        trial.record(name, float(len(seen)))
    assert seen == ["early", "torch"] + ["torch"] * 3 + ["early"] * 6 + \
        ["torch"] * 3
    assert trial.times == {"early": [7.0, 8.0, 10.0, 11.0],
                           "torch": [4.0, 5.0, 13.0, 14.0]}
    assert trial.medians() == [9.0, 9.0]
    # The defaults: TRIAL_STEPS measured steps of each of two candidates
    # in TRIAL_LENGTH steps.
    trial = sct._trial._LoweringTrial(["a", "b"])
    steps = 0
    while not trial.finished():
        trial.record(trial.next(), 1.0)
        steps += 1
    assert steps == sct.TRIAL_LENGTH
    assert trial.times == {"a": [1.0] * sct.TRIAL_STEPS,
                           "b": [1.0] * sct.TRIAL_STEPS}
    assert sct._trial._faster_lowering({"early": 2.0, "torch": 1.0}) == "torch"
    assert sct._trial._faster_lowering({"early": 1.0, "torch": 1.0}) == "early"


def test_early_receives_keep_their_order_and_follow_their_forward():
    # Every receive goes as early as it may: after the receive before it
    # (gloo and NCCL match a pair's messages in the order posted), and a
    # RECV_B after its microbatch's forward on that stage (which creates
    # its buffer); everything else keeps its order. A middle stage of
    # 1F1B, as torch's lowering orders it:
    from stagecraft.torch._lower import _receives_early
    from torch.distributed.pipelining import schedules as ts
    order = ("1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 1RECV_B0 1I0 "
             "1SEND_B0 1RECV_F2 1F2 1SEND_F2 1RECV_B1 1I1 1SEND_B1 1RECV_B2 "
             "1I2 1SEND_B2 1W0 1W1 1W2").split()
    early = [str(a) for a in
             _receives_early([ts._Action.from_str(c) for c in order])]
    assert early[:5] == ["1RECV_F0", "1RECV_F1", "1F0", "1RECV_B0",
                         "1RECV_F2"]
    for kept in (lambda a: "RECV" in a, lambda a: "RECV" not in a):
        assert ([a for a in early if kept(a)]
                == [a for a in order if kept(a)])
    for a in order:
        if "RECV" in a:
            # Never later than torch put it; a RECV_B after its forward.
            assert early.index(a) <= order.index(a)
            if "RECV_B" in a:
                assert early.index(a) > early.index(a.replace("RECV_B", "F"))


def test_single_stage_orders_run_on_torchs_single_stage_schedules():
    # A plan whose every rank runs exactly torch's single-stage GPipe or 1F1B
    # order goes to that class (its own step loop, faster than the
    # multi-stage runtime); anything else stays on the multi-stage runtime.
    for ranks, n_mb in [(2, 4), (4, 8), (3, 7)]:
        p = sc.Problem(ranks=ranks, microbatches=n_mb,
                       stages=[sc.Stage() for _ in range(ranks)])
        assert sct._lower._single_stage_class(sct.plan(p, kind="1f1b")) is \
            torch.distributed.pipelining.Schedule1F1B
        assert sct._lower._single_stage_class(sct.plan(p, kind="gpipe")) is \
            torch.distributed.pipelining.ScheduleGPipe
        assert sct._lower._single_stage_class(sct.plan(p, kind="zb-h1")) is None
    few = sc.Problem(ranks=4, microbatches=2,
                     stages=[sc.Stage() for _ in range(4)])
    assert sct._lower._single_stage_class(sct.plan(few, kind="1f1b")) is None
    # Which runtime each lowering gives: by default ("auto") 1F1B's order on
    # Schedule1F1B and every other order, GPipe's too, on the multi-stage
    # runtime (with its trial of the lowerings); "torch" keeps both
    # classes; "early" and "stagecraft" never take them, nor does any
    # extra runtime option.
    pipe = torch.distributed.pipelining
    p = sc.Problem(ranks=2, microbatches=4, stages=[sc.Stage(), sc.Stage()])
    one, gpipe, zb = (sct.plan(p, kind=k) for k in ("1f1b", "gpipe", "zb-h1"))
    assert sct._lower._runtime_for(one, "auto") is pipe.Schedule1F1B
    assert sct._lower._runtime_for(gpipe, "auto") is None
    assert sct._lower._runtime_for(zb, "auto") is None
    assert sct._lower._runtime_for(gpipe, "torch") is pipe.ScheduleGPipe
    assert sct._lower._runtime_for(one, "torch", options=True) is None
    for lowering in ("early", "stagecraft"):
        assert sct._lower._runtime_for(one, lowering) is None


@pytest.mark.parametrize("kind", ["1f1b", "zb-v", "dualpipev"])
def test_torchs_own_encoder_layers_equal_the_unpipelined_model(tmp_path,
                                                               kind):
    # Stages of torch's nn.TransformerEncoderLayer (the benchmark's second
    # model) train equal to the unpipelined model, as the tests' blocks do.
    assert_equal_to_unpipelined(launch(tmp_path, "equal", kind, 2,
                                       STAGECRAFT_TORCH_MODEL="encoder"))


def test_calibrate_refuses_an_unknown_statistic_or_target():
    problem = sc.Problem(ranks=2, microbatches=2,
                         stages=[sc.Stage(), sc.Stage()])
    with pytest.raises(sc.ScheduleError, match="reproduce='steps'"):
        sct.calibrate([], problem, reproduce="steps")
    with pytest.raises(sc.ScheduleError, match="statistic='mode'"):
        sct.calibrate([], problem, statistic="mode")


@pytest.mark.parametrize("kind", ["1f1b", "zb-v", "dualpipev"])
def test_a_trace_records_every_action_of_real_steps_and_calibrates(tmp_path,
                                                                    kind):
    results = launch(tmp_path, "trace", kind, 2, n_mb=4)
    # torch runs an overlapped F&B as its halves, each traced.
    plan = [[half for a in actions
             for half in re.sub(r"\((.*);(.*)\)OVERLAP_F_B", r"\1,\2",
                                a).split(",")]
            for actions in results[0]["plan"]]
    for who in ("stagecraft", "torch"):
        # Every rank gathered the same trace.
        t = results[0][who]
        assert all(res[who]["computes"] == t["computes"] for res in results)
        assert all(res[who]["unwrapped"] and res[who]["grads"]
                   for res in results)
        steps = sorted({c[1] for c in t["computes"]})
        assert steps == [0, 1, 2] and len(t["step_times"]) == 3
        for rank in range(2):
            for step in steps:
                mine = sorted((c for c in t["computes"]
                               if c[0] == rank and c[1] == step),
                              key=lambda c: c[3])
                # Each compute once, one after the other, inside the step()
                # call that ran it.
                (b, e), = [(x[2], x[3]) for x in t["steps"]
                           if x[0] == rank and x[1] == step]
                assert all(b <= c[3] < c[4] <= e for c in mine)
                assert all(x[4] <= y[3] for x, y in zip(mine, mine[1:]))
                actions = [c[2] for c in mine]
                if who == "stagecraft":
                    # Stagecraft's plan runs in its own order.
                    assert actions == plan[rank]
                else:
                    # torch's own order of the kind: the same computes.
                    assert sorted(actions) == sorted(plan[rank])
        # The Chrome trace lays the last measured step beside the
        # simulated one: one event per compute measured, one per action
        # simulated.
        events = [e for e in t["chrome"]["traceEvents"] if e.get("ph") == "X"]
        names = {e["pid"]: e for e in t["chrome"]["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
        assert len(names) == 2
        per_step = len(t["computes"]) // 3
        assert len(events) == per_step + sum(map(len, results[0]["plan"]))
        # The report has a row per rank and kind it ran, and the steps.
        report = t["report"]
        assert "measured / simulated" in report and "comm wait" in report
        kinds = {c[2].strip("0123456789") for c in t["computes"]}
        for k in kinds:
            assert any(line.split()[1:2] == [k] for line in
                       report.splitlines()[2:])
        # Calibrated costs: positive, per stage, and a plan from them.
        assert all(x > 0 for c in t["calibrated"] for x in c)
        assert t["details"]["steps"] == 3
        # Every traced step replays, and the stretch makes the simulator
        # reproduce them: Stagecraft's plan (DualPipeV's overlapped F&B
        # replayed as the plan's one action) simulates to the median
        # step.
        assert t["details"]["replayed"] == 3 and t["details"]["stretch"] > 0
        if who == "stagecraft":
            assert t["simulated"] == pytest.approx(
                statistics.median(t["step_times"]), rel=1e-6)
        assert len(t["overhead"]) == 2 and min(t["overhead"]) >= 0
        assert t["replanned"] > 0
        assert t["details"]["message_overhead"] >= 0
        # Per rank, what the threads did per step (Linux keeps the figures):
        # the step() thread ran and may have waited for a CPU, within the
        # time the trace was open; the process's other threads (gloo's)
        # ran too. The report says so.
        for rank, res in enumerate(results):
            usage = res[who]["cpu"][rank]
            assert usage is not None
            assert 0 < usage["run"] and usage["wait"] >= 0
            assert usage["run"] + usage["wait"] <= res[who]["open_ms"] / 3
            assert usage["others"] and min(usage["others"].values()) >= 0
            assert f"rank {rank}: per step, the step() thread ran" in report


def random_problem(rng, ranks, n, n_mb, cheapest_fused=None):
    """n stages with random uneven F, I and W and, when `cheapest_fused` is
    given, a fused backward of (I + W) x U(cheapest_fused, 1), as torch's
    runtime has one; a random latency."""
    stages = []
    for _ in range(n):
        i, w = rng.uniform(0.5, 2.0), rng.uniform(0.3, 1.5)
        forward = rng.uniform(0.5, 2.0)
        fused = (None if cheapest_fused is None
                 else (i + w) * rng.uniform(cheapest_fused, 1.0))
        stages.append(sc.Stage(forward=forward, backward_input=i,
                               backward_weight=w, fused_backward=fused))
    return sc.Problem(ranks=ranks, microbatches=n_mb, stages=stages,
                      latency=rng.uniform(0.0, 0.2))


def test_no_kind_plans_slower_than_its_torch_namesake_in_simulation():
    # Random uneven costs (half with a fused backward cheaper than I + W,
    # message overheads as torch's runtime has them): each kind with a
    # torch namesake simulates no slower than that class's order, and
    # where the namesake's order is faster the kind returns it, saying so.
    import random
    rng = random.Random(11)
    taken = set()
    for seed in range(24):
        ranks = rng.choice([2, 4])
        n_mb = ranks * rng.choice([1, 2, 3])
        for kind, name in sct.NAMESAKES.items():
            n = ranks if kind in ("gpipe", "1f1b") else 2 * ranks
            problem = random_problem(rng, ranks, n, n_mb,
                                     0.5 if seed % 2 else None)
            problem.message_overhead = rng.uniform(0.0, 0.3)
            theirs = sct.torch_orders(problem).get(name)
            if theirs is None:  # the class refuses this shape
                continue
            ours = sct.plan(problem, kind=kind)
            own = sc.schedule(problem, kind=kind)
            assert ours.kind == kind
            # Without a memory limit the namesake counts only within the
            # kind's own peak on every rank.
            assert all(o <= k * (1 + 1e-9) + 1e-12 for o, k in
                       zip(ours.peak_memory, own.peak_memory)), (seed, kind)
            if all(t <= k * (1 + 1e-9) + 1e-12 for t, k in
                   zip(theirs.peak_memory, own.peak_memory)):
                assert ours.makespan <= theirs.makespan + 1e-9, (seed, kind)
            if ours.choice == f"torch {name}":
                taken.add(kind)
                assert ours.to_csv() == theirs.to_csv()
    assert taken  # some namesakes' orders do win on these costs


def test_measured_activation_memory_is_what_the_plan_simulates(tmp_path):
    # Costs and memory from profile (activation: what the forward saves for
    # backward; weight_grad: what torch's split backward still holds for
    # the W), one plan per kind, one real step under activation_memory:
    # every rank's measured peak is the simulated one within 15 %, nothing
    # stays held after the step, and the kinds rank as simulated.
    kinds = ["gpipe", "1f1b", "zb-h1", "zb-v"]
    results = launch(tmp_path, "memory", ",".join(kinds), 2)
    for res in results:
        assert res == results[0]  # gathered: every rank holds all peaks
    res = results[0]
    for kind in kinds:
        for measured, simulated in zip(res[kind]["measured"],
                                       res[kind]["simulated"]):
            assert 0.85 <= measured / simulated <= 1.15, (kind, res[kind])
    assert all(results[r][k]["live"] == 0 for r in range(2) for k in kinds)
    assert max(res["gpipe"]["measured"]) > 2 * max(res["1f1b"]["measured"])


def test_activation_memory_counts_saved_bytes_once_and_releases_them():
    # In one process: the bytes autograd saves, each storage once (the
    # forward's input is shared by two forwards; tanh saves its output,
    # which is lin2's input), weights left out, all released by the
    # backwards, including a backward that retains its graph and is then
    # dropped (a saved output must not keep its graph alive).
    lin1, lin2 = torch.nn.Linear(8, 32), torch.nn.Linear(32, 8)

    class Stage:
        submod = torch.nn.Sequential(lin1, torch.nn.Tanh(), lin2)
        group = None

    class Runner:
        _stage = Stage()

    x = torch.randn(4, 8)
    with sct.activation_memory(Runner()) as m:
        a = Stage.submod(x).sum()
        b = Stage.submod(x).sum()
        # x once; per forward tanh's output, 4 x 32 floats.
        assert m.live == 4 * 8 * 4 + 2 * (4 * 32 * 4)
        a.backward()
        torch.autograd.grad(b, [lin1.weight], retain_graph=True)
        del b
    assert m.live == 0 and m.peak == 4 * 8 * 4 + 2 * (4 * 32 * 4)
    assert m.peaks == [m.peak]
    with pytest.raises(sc.ScheduleError, match="no tensor was saved"):
        with sct.activation_memory(Runner()):
            pass


def test_auto_is_never_slower_than_torchs_own_orders_in_simulation():
    # Random uneven costs, some with a fused backward cheaper than I + W
    # (torch's runtime): auto's plan for torch simulates no slower than any
    # of torch's built-in schedules that fit the shape, within the memory
    # limit.
    import random
    rng = random.Random(5)
    chosen = set()
    for seed in range(36):
        ranks = rng.choice([2, 4])
        n = ranks * rng.choice([1, 2])
        n_mb = ranks * rng.choice([1, 2, 3])
        problem = random_problem(rng, ranks, n, n_mb,
                                 0.6 if seed % 2 else None)
        theirs = sct.torch_orders(problem)
        assert theirs, (ranks, n, n_mb)
        ours = sct.plan(problem, kind="auto", time_limit=0.5)
        assert ours.kind == "auto"
        # Without a memory limit, within 1F1B's peak (auto's default), and
        # no slower than any of torch's orders within it.
        limit = sc.default_memory_limit(problem)
        assert max(ours.peak_memory) <= limit * (1 + 1e-9), seed
        for name, order in theirs.items():
            if max(order.peak_memory) <= limit * (1 + 1e-9):
                assert ours.makespan <= order.makespan + 1e-9, (seed, name)
        if ours.choice.startswith("torch "):
            assert ours.choice[len("torch "):] in theirs
            chosen.add(ours.choice)
    # Where the fused backward is cheap, some of torch's orders win, and
    # auto returns them.
    assert chosen


def test_mismatches_fail_loudly_on_every_rank_and_nothing_hangs(tmp_path):
    # A kind other than the plan's; a plan for another rank count; a wrong
    # stage list on the last rank only (every rank gets its message, not a
    # transport error); different plans on the ranks; a collective called
    # on rank 0 alone (fails within seconds, saying it is a collective);
    # planning on rank 0 alone and broadcast_plan, which runs.
    results = launch(tmp_path, "promises", "zb-v", 2,
                     STAGECRAFT_COLLECTIVE_TIMEOUT="3")
    for rank, res in enumerate(results):
        assert "kind='gpipe', but the plan given is a zb-v plan" in \
            res["kind"], res["kind"]
        assert "the 1f1b plan has 4 ranks but the process group has 2" in \
            res["rank count"], res["rank count"]
        wrong = res["one rank wrong"]
        assert "rank 1 holds stages [2, 3], but the zb-v plan places [1, 2]" \
            in wrong, wrong
        if rank == 0:
            assert wrong.startswith("rank 1 of the pipeline: "), wrong
        assert "the ranks hold different plans" in res["different plans"]
        assert res["fixed"] == ["early", "shared", True]
        assert res["grad_err"] <= 1e-5
        assert res["shared"] == results[0]["shared"]
    message = results[0]["collective on one rank"]
    assert "stagecraft.torch.plan(kind='auto', group=...) is a collective" \
        in message and "only 1 of its 2 ranks called it within 3 s" in message
    assert results[0]["collective on one rank s"] < 10.0
    assert "collective on one rank" not in results[1]


def test_the_trial_speaks_and_a_saved_plan_skips_it(tmp_path):
    # zb-v's order on the multi-stage runtime: the trial logs its
    # candidates, the quiet transport's priority change and its end; the
    # runner's copy of the plan records the kept candidate (the plan given
    # is unchanged), and that plan saved and loaded runs it at once.
    results = launch(tmp_path, "trial-log", "zb-v", 2, n_mb=4)
    for rank, res in enumerate(results):
        text = "\n".join(res["messages"])
        assert f"rank {rank}: trial of 4 candidates (early, early+quiet, " \
            f"torch, torch+quiet) over the next {res['steps']} training " \
            "steps" in text, text
        assert res["steps"] == 2 * sct.TRIAL_LENGTH
        assert "run at idle priority (SCHED_IDLE) during each step" in text
        assert f"rank {rank}: trial done after {res['steps']} steps" in text
        assert f"kept {sct._trial._candidate_name(*res['kept'])} (lowering " \
            f"'{res['kept'][0]}', transport '{res['kept'][1]}')" in text
        assert res["kept"] == results[0]["kept"]
        assert res["given"] == [None, None]
        assert res["saved"] == res["kept"]
        assert res["again"] == res["kept"] + [True]
        assert res["grad_err"] <= 1e-5


def test_auto_keeps_1f1bs_memory_without_a_limit():
    # The reported case: auto returned torch's GPipe order, four times
    # 1F1B's peak, for 0.01 simulated ms. Without a limit it stays within
    # 1F1B's peak; with room given, GPipe's order may win.
    stages = [sc.Stage(forward=7.52, backward_input=8.69, backward_weight=9.87,
                       fused_backward=14.01, activation=3.07, weight_grad=3.01),
              sc.Stage(forward=7.57, backward_input=8.57, backward_weight=9.71,
                       fused_backward=14.01, activation=3.07, weight_grad=3.01)]
    for s in stages:
        s.output = 0.0625
    p = sc.Problem(ranks=2, microbatches=8, stages=stages, latency=0.061)
    found = sct.plan(p, kind="auto")
    assert max(found.peak_memory) <= max(sc.schedule(p, kind="1f1b").peak_memory)
    assert found.choice != "torch ScheduleGPipe"
    assert max(sc.schedule(p, kind="auto").peak_memory) <= 6.14 + 1e-9
    roomy = sct.plan(p, kind="auto", memory_limit=30.0)
    assert roomy.makespan <= found.makespan


def test_kinds_are_named_unknown_or_not_on_torch():
    p = sc.Problem(ranks=2, microbatches=4, stages=[sc.Stage(), sc.Stage()])
    with pytest.raises(sc.ScheduleError, match="unknown kind 'nonsense'"):
        sct.plan(p, kind="nonsense")
    with pytest.raises(sc.ScheduleError, match="kind 'helix' does not run on "
                       "torch's pipeline runtime: helix moves attention"):
        sct.plan(p, kind="helix")
    # exact, which sc.kinds() lists, plans for torch like the other kinds.
    assert sct.plan(p, kind="exact", time_limit=1.0).kind == "exact"
    assert set(sc.kinds()) - set(sct.KINDS) - set(sct.SEARCHES) == {"helix"}


def test_check_names_the_class_and_refuses_stages_it_does_not_place():
    # torch's classes built on the stages of one rank of 2 (the stand-ins
    # torch_orders uses): V placement holds stages 0 and 3 on rank 0, loop
    # placement 0 and 2.
    n, rank, ranks = 4, 0, 2
    for cls, right, wrong in ((ts.ScheduleZBVZeroBubble, [0, 3], [0, 2]),
                              (ts.ScheduleDualPipeV, [0, 3], [0, 2]),
                              (ts.ScheduleInterleaved1F1B, [0, 2], [0, 3])):
        made = cls([sct._plan._OrderStage(i, n, rank, ranks) for i in right], 8)
        assert sct.check(made).kind == cls.__name__
        with pytest.raises(sc.ScheduleError) as e:
            sct.check(cls([sct._plan._OrderStage(i, n, rank, ranks)
                           for i in wrong], 8))
        assert f"{cls.__name__} runs stages {right} on rank 0 (its " \
            f"placement), but this rank's PipelineStages are {wrong}" in \
            str(e.value)


def test_plans_for_torch_save_and_load_exactly(tmp_path):
    # Every kind sct.plan runs, on uneven costs where torch's orders win
    # some (their choice "torch <class>"): saved, loaded and pickled, the
    # same plan.
    import pickle
    import random
    rng = random.Random(2)
    choices = set()
    for k, kind in enumerate(sct.KINDS + sct.SEARCHES):
        for ranks in (2, 4):
            n = ranks if kind in ("gpipe", "1f1b") else 2 * ranks
            p = random_problem(rng, ranks, n, 2 * ranks, 0.5)
            plan = sct.plan(p, kind=kind, time_limit=0.5)
            choices.add(plan.choice)
            path = tmp_path / f"{kind}{ranks}.json"
            plan.save(path)
            for back in (sc.load_plan(path), pickle.loads(pickle.dumps(plan))):
                assert back.to_csv() == plan.to_csv()
                assert back.to_csv(comms=True) == plan.to_csv(comms=True)
                assert (back.makespan, back.peak_memory) == \
                    (plan.makespan, plan.peak_memory)
                assert (back.kind, back.choice, back.lower_bound) == \
                    (plan.kind, plan.choice, plan.lower_bound)
    assert any(c.startswith("torch ") for c in choices)


def test_a_policys_plan_runs_equal_to_the_unpipelined_model(tmp_path):
    # Interleaved 1F1B written as a policy, planned by sct.plan(policy=...)
    # on rank 0 and broadcast, run on torch's runtime.
    results = launch(tmp_path, "policy", "interleaved", 2)
    for res in results:
        assert res["kind"] == "policy" and res["choice"] == "interleaved"
        assert res["placement"] == [0, 1, 0, 1]
        assert res["grad_err"] <= 1e-5 and res["loss_err"] <= 1e-5, res


@pytest.mark.parametrize("name, cls", [
    ("looped-bfs", "ScheduleLoopedBFS"),
    ("interleaved-1f1b", "ScheduleInterleaved1F1B")])
def test_policies_equal_torchs_orders(name, cls):
    # The library's policy gives the order torch's class builds (its
    # pipeline_order, read with check) on a grid of ranks x chunks x
    # microbatches wherever torch's class takes the shape.
    policy = sc.Policy.from_file(os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "examples", "policies",
        f"{name}.policy"))
    klass = getattr(ts, cls)
    compared = 0
    for ranks in (2, 3, 4):
        for chunks in (2, 3):
            n = ranks * chunks
            for n_mb in range(ranks, 4 * ranks + 1, ranks):
                problem = sc.Problem(ranks=ranks, microbatches=n_mb,
                                     stages=[sc.Stage() for _ in range(n)])
                try:
                    theirs = sct.check(klass([sct._plan._OrderStage(
                        i, n, 0, ranks) for i in range(0, n, ranks)], n_mb),
                        problem)
                except (ValueError, RuntimeError, AssertionError):
                    continue  # torch's class refuses the shape
                ours = sc.schedule(problem, policy=policy)
                assert ours.to_csv() == theirs.to_csv(), (ranks, chunks, n_mb)
                compared += 1
    assert compared >= 12


def test_the_zbv_policy_runs_torchs_zbv_forwards_and_input_gradients():
    # examples/policies/zbv.policy: order keys give the phases torch's
    # ScheduleZBVZeroBubble order of forwards and input gradients on every
    # rank (read from torch's own class); each W follows its I, where
    # torch defers the drain's W.
    policy = sc.Policy.from_file(os.path.join(
        os.path.dirname(__file__), "..", "..", "examples", "policies",
        "zbv.policy"))
    for ranks, n_mb in ((2, 3), (2, 8), (3, 5), (4, 7), (4, 12)):
        problem = sct._check._uniform_problem(2 * ranks, ranks, n_mb)
        theirs = sct.torch_orders(problem)["ScheduleZBVZeroBubble"]
        ours = sc.schedule(problem, policy=policy)
        for r in range(ranks):
            for kind in "FI":
                def only(actions):
                    return [a for a in actions
                            if re.fullmatch(rf"\d+{kind}\d+", a)]
                assert only(ours.actions(r)) == only(theirs.actions(r)), \
                    (ranks, n_mb, r, kind)


def test_the_interleaved_zb_policy_is_torchs_interleaved_zero_bubble():
    # examples/policies/interleaved-zb.policy (torch's rounds, warm-up and
    # `defer W rank`) is torch's ScheduleInterleavedZeroBubble order, action
    # for action on every rank, read from torch's own class (two stages a
    # rank), at every point where torch builds it.
    policy = sc.Policy.from_file(os.path.join(
        os.path.dirname(__file__), "..", "..", "examples", "policies",
        "interleaved-zb.policy"))
    compared = 0
    for ranks in (2, 3, 4):
        for n_mb in range(1, 3 * ranks + 1):
            problem = sct._check._uniform_problem(2 * ranks, ranks, n_mb)
            theirs = sct.torch_orders(problem).get(
                "ScheduleInterleavedZeroBubble")
            if theirs is None:
                continue
            ours = sc.schedule(problem, policy=policy)
            for r in range(ranks):
                assert ours.actions(r) == theirs.actions(r), (ranks, n_mb, r)
            compared += 1
    assert compared >= 20, compared
