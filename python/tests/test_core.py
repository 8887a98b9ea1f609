"""The stagecraft package's core API: every kind, the properties the
library guarantees, CSV in both directions, specs through the dialect, and
errors raised as ScheduleError (never a crash)."""

import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest

import stagecraft as sc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")

FIXED = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v", "dualpipev"]


def problem(ranks, microbatches, stages_per_rank=2, latency=0.0, w=0.5):
    return sc.Problem(
        ranks=ranks, microbatches=microbatches, latency=latency,
        stages=[sc.Stage(forward=1.0, backward_input=1.0, backward_weight=w,
                         activation=1.0, weight_grad=0.5)
                for _ in range(stages_per_rank * ranks)])


def test_kinds_lists_every_kind():
    assert sc.kinds() == FIXED[:-1] + ["dualpipev", "helix", "auto", "exact"]


def test_exact_proves_a_small_optimum():
    # 3 ranks, 3 microbatches, 6 stages at the zero-bubble paper's costs:
    # the search proves 17.078 optimal over auto's placements at 1F1B's
    # peak, above the memory-aware bound (17.031).
    stages = [sc.Stage(forward=1.0, backward_input=0.9765,
                       backward_weight=0.5041, activation=0.5,
                       weight_grad=0.25, name=f"s{i}") for i in range(6)]
    p = sc.Problem(ranks=3, microbatches=3, latency=0.0324, stages=stages)
    s = sc.schedule(p, kind="exact")
    assert s.choice.startswith("optimal over auto's 3 placements")
    assert s.makespan == pytest.approx(17.078)
    assert s.memory_aware_bound == pytest.approx(17.031)
    with pytest.raises(sc.ScheduleError, match="does not plan recomputation"):
        sc.schedule(p, kind="exact", recompute="full")


@pytest.mark.parametrize("kind", FIXED + ["auto"])
@pytest.mark.parametrize("ranks,microbatches", [(1, 1), (2, 3), (4, 8), (3, 7)])
def test_every_kind_is_a_complete_verified_schedule(kind, ranks, microbatches):
    p = problem(ranks, microbatches)
    s = sc.schedule(p, kind=kind, time_limit=0.5)
    assert s.num_ranks == ranks
    assert len(s.placement) == 2 * ranks
    assert all(0 <= r < ranks for r in s.placement)
    assert len(s.peak_memory) == ranks
    # Every stage's forward and backward of every microbatch, exactly once,
    # on the rank hosting the stage.
    seen = []
    for r in range(ranks):
        for a in s.actions(r):
            if a.endswith("OVERLAP_F_B"):
                f, b = a[1:a.index(")")].split(";")
                seen += [f, b]
            else:
                seen.append(a)
    forwards = sorted(a for a in seen if "F" in a)
    assert forwards == sorted(f"{st}F{m}" for st in range(2 * ranks)
                              for m in range(microbatches))
    assert len(seen) == len(set(seen))
    # The simulated figures agree with each other.
    work = sum(st.forward + st.backward_input + st.backward_weight
               for st in p.stages) * microbatches
    assert s.makespan * ranks * (1 - s.bubble_ratio) == pytest.approx(work)
    assert max(s.busy) <= s.makespan + 1e-9


def test_zero_bubble_kinds_beat_1f1b_within_its_memory():
    p = problem(4, 8)
    base = sc.schedule(p, kind="1f1b")
    for kind in ["zb-h1", "zb-v"]:
        s = sc.schedule(p, kind=kind)
        assert s.makespan < base.makespan
        assert max(s.peak_memory) <= max(base.peak_memory) + 1e-9


def test_auto_respects_the_memory_limit_and_reports_its_bounds():
    p = problem(4, 8)
    limit = max(sc.schedule(p, kind="1f1b").peak_memory)
    s = sc.schedule(p, kind="auto", memory_limit=limit, time_limit=1.0)
    assert max(s.peak_memory) <= limit + 1e-9
    assert s.choice
    assert 0 < s.lower_bound <= s.memory_aware_bound <= s.makespan + 1e-9
    with pytest.raises(sc.ScheduleError, match="exceeds memory-limit=1"):
        sc.schedule(p, kind="gpipe", memory_limit=1.0)


def test_actions_use_torchs_spelling():
    s = sc.schedule(problem(2, 4), kind="zb-h1")
    assert s.actions(0)[0] == "0F0"
    assert any(a[-2] in "IW" or a[-3] in "IW" for a in s.actions(0))
    v = sc.schedule(problem(2, 6), kind="dualpipev")
    overlapped = [a for r in range(2) for a in v.actions(r) if "OVERLAP" in a]
    assert overlapped and all(a.startswith("(") and ";" in a for a in overlapped)
    with pytest.raises(IndexError):
        s.actions(2)


@pytest.mark.parametrize("kind", FIXED)
@pytest.mark.parametrize("comms", [False, True])
def test_csv_round_trip_is_the_same_schedule(kind, comms):
    p = problem(2, 5, latency=0.1)
    s = sc.schedule(p, kind=kind)
    text = s.to_csv(comms=comms)
    assert len(text.strip().split("\n")) == 2
    back = sc.from_csv(p, text)
    assert back.makespan == pytest.approx(s.makespan)
    assert back.placement == s.placement
    for r in range(2):
        assert back.actions(r) == s.actions(r)
    assert ("SEND_F" in text) == comms


def test_from_csv_names_the_cycle_of_a_csv_that_would_hang():
    p = problem(2, 1, stages_per_rank=1)
    # Rank 0 waits for the gradient before it sends the activation.
    text = "0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"
    with pytest.raises(sc.ScheduleError,
                       match=r"communication deadlocks: ranks 0, 1 wait "
                             r"forever; cycle 0 -> 1 -> 0"):
        sc.from_csv(p, text)


def test_from_csv_rejects_bad_csvs_with_the_position():
    p = problem(2, 2, stages_per_rank=1)
    with pytest.raises(sc.ScheduleError, match="1:1: bad action 'XF0'"):
        sc.from_csv(p, "XF0\n1F0\n")
    with pytest.raises(sc.ScheduleError, match="rows"):
        sc.from_csv(p, "0F0,0F1,0B0,0B1\n")
    with pytest.raises(sc.ScheduleError, match="missing"):
        sc.from_csv(p, "0F0,0B0\n1F0,1B0\n")


def test_load_reads_a_spec_through_the_dialect():
    p = sc.load(os.path.join(EXAMPLES, "demo.mlir"))
    assert (p.name, p.ranks, p.microbatches, len(p.stages)) == ("demo", 4, 8, 4)
    assert p.stages[0].weight_grad == 0.5
    s = sc.schedule(p, kind="1f1b")
    assert s.makespan == 33
    assert s.summary().startswith(
        "schedule @demo_1f1b for @demo: 4 ranks, 4 stages, 8 microbatches")


def test_load_errors_carry_the_located_diagnostic(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("pipe.pipeline @p ranks(0) microbatches(1) {\n"
                   "  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, "
                   "backward_weight = 1.0)\n}\n")
    with pytest.raises(sc.ScheduleError, match=r"bad.mlir:1:1: error: .*ranks"):
        sc.load(str(bad))
    with pytest.raises(sc.ScheduleError, match="cannot open"):
        sc.load(str(tmp_path / "missing.mlir"))


def test_every_example_spec_loads_as_the_tools_read_it():
    # Through the problem JSON, field by field: what the package reads is
    # what stagecraft-translate wrote, and it schedules as the tools do.
    for name in sorted(os.listdir(EXAMPLES)):
        if not name.endswith(".mlir"):
            continue
        path = os.path.join(EXAMPLES, name)
        written = subprocess.run(
            [shutil.which("stagecraft-translate") or "stagecraft-translate",
             "--pipe-to-problem", path], capture_output=True, text=True)
        if written.returncode != 0:
            with pytest.raises(sc.ScheduleError):
                sc.load(path)
            continue
        loaded = sc.load(path)
        whole = json.loads(written.stdout)
        # The data parallelism around the pipeline comes apart from it.
        dp = whole.pop("data_parallel", None)
        assert json.loads(loaded.to_json()) == whole, name
        assert sc.problem_from_json(loaded.to_json()).to_json() == loaded.to_json()
        assert (dp is None) == ("data_parallel(" not in open(path).read())
        assert (sc.load_data_parallel(path) is None) == (dp is None), name


def test_a_specs_data_parallelism_loads_for_plan_data_parallel():
    path = os.path.join(EXAMPLES, "data-parallel.mlir")
    dp = sc.load_data_parallel(path)
    assert dp["degree"] == 32 and dp["sharding"] == "none"
    assert dp["grad_bytes"][0] == 2.75e9 and len(dp["grad_bytes"]) == 8
    assert dp["latency"] == 1e-5 and dp["bandwidth"] == 5e10
    assert dp["optimizer_per_byte"] == 5e-12
    found = sc.plan_data_parallel(sc.load(path), **dp, time_limit=0.5)
    assert found["step"] >= found["bound"] > 0
    assert sc.load_data_parallel(os.path.join(EXAMPLES, "demo.mlir")) is None
    # A hand-edited file's bad data parallelism is named.
    text = subprocess.run(
        [shutil.which("stagecraft-translate") or "stagecraft-translate",
         "--pipe-to-problem", path], capture_output=True, text=True).stdout
    with pytest.raises(sc.ScheduleError, match="problem JSON: data_parallel: "
                       "data-parallel degree 0 must be at least 1"):
        sc.data_parallel_from_json(text.replace('"degree": 32', '"degree": 0'))


def test_load_without_stagecraft_translate_names_both_ways(tmp_path, monkeypatch):
    monkeypatch.delenv("STAGECRAFT_TRANSLATE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sc.ScheduleError,
                       match="put stagecraft-translate .* on PATH, or name it "
                             "in the STAGECRAFT_TRANSLATE environment variable"):
        sc.load(os.path.join(EXAMPLES, "demo.mlir"))
    # Everything else works without it.
    assert sc.schedule(problem(2, 4), kind="zb-v").makespan > 0


def test_load_uses_stagecraft_translate_named_in_the_environment(monkeypatch):
    tool = shutil.which("stagecraft-translate")
    if tool is None:
        pytest.skip("stagecraft-translate is not on PATH")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("STAGECRAFT_TRANSLATE", tool)
    assert sc.load(os.path.join(EXAMPLES, "demo.mlir")).ranks == 4


def test_problem_json_errors_name_the_field():
    text = problem(2, 4).to_json().replace('"ranks"', '"colour": 1, "ranks"')
    with pytest.raises(sc.ScheduleError, match='key "colour": unknown'):
        sc.problem_from_json(text)
    with pytest.raises(sc.ScheduleError, match="problem JSON"):
        sc.problem_from_json("{")


def test_the_extension_needs_no_llvm_mlir_or_fmt():
    # Imported in a fresh process with an empty LD_LIBRARY_PATH: no LLVM,
    # MLIR or fmt library is mapped.
    env = dict(os.environ, LD_LIBRARY_PATH="")
    maps = subprocess.run(
        [sys.executable, "-c",
         "import stagecraft, sys; sys.stdout.write(open('/proc/self/maps').read())"],
        capture_output=True, text=True, env=env, check=True).stdout
    for lib in ("libLLVM", "libMLIR", "libfmt"):
        assert lib not in maps


def test_version_is_the_tools_version():
    tool = shutil.which("stagecraft-translate")
    if tool is None:
        pytest.skip("stagecraft-translate is not on PATH")
    out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    assert f"Stagecraft {sc.__version__} (commit " in out


@pytest.mark.skipif(not os.environ.get("STAGECRAFT_WHEEL_TEST"),
                    reason="only when testing the installed wheel")
def test_the_installed_wheel_is_what_is_tested():
    assert not os.path.abspath(sc.__file__).startswith(ROOT + os.sep)


def test_the_span_objective_fills_the_span_when_memory_allows():
    p = problem(4, 8, stages_per_rank=1, w=1.0)
    by_makespan = sc.schedule(p, kind="auto", memory_limit=8.0, time_limit=1.0)
    by_span = sc.schedule(p, kind="auto", memory_limit=8.0, time_limit=1.0,
                          objective="span")
    assert max(by_span.span) == by_span.span_bound == 24
    assert max(by_makespan.span) == 27
    assert by_makespan.makespan <= by_span.makespan
    assert max(by_span.peak_memory) <= 8.0
    with pytest.raises(sc.ScheduleError, match="unknown objective 'fast'"):
        sc.schedule(p, kind="auto", objective="fast")


def test_bad_problems_and_options_raise_schedule_error():
    with pytest.raises(sc.ScheduleError, match="ranks"):
        sc.Problem(ranks=0, microbatches=1, stages=[sc.Stage()])
    with pytest.raises(sc.ScheduleError, match="fewer stages than ranks|stages"):
        sc.schedule(sc.Problem(ranks=4, microbatches=1, stages=[sc.Stage()]))
    with pytest.raises(sc.ScheduleError, match="unknown schedule kind '2f2b'"):
        sc.schedule(problem(2, 2), kind="2f2b")
    with pytest.raises(sc.ScheduleError, match="V placement needs 2 stages per rank"):
        sc.schedule(problem(2, 2, stages_per_rank=1), kind="zb-v")
    with pytest.raises(sc.ScheduleError, match="time_limit"):
        sc.schedule(problem(2, 2), kind="auto", time_limit=0.0)
    with pytest.raises(sc.ScheduleError,
                       match="stage @s0: 'forward' must be finite"):
        sc.Problem(ranks=1, microbatches=1,
                   stages=[sc.Stage(forward=float("nan"))])


def test_stage_defaults_follow_the_dsl():
    st = sc.Stage(activation=2.0)
    assert st.weight_grad == 2.0
    assert sc.Stage(activation=2.0, weight_grad=0.5).weight_grad == 0.5


def test_helix_schedules_but_has_no_torch_csv():
    p = sc.load(os.path.join(EXAMPLES, "helix.mlir"))
    s = sc.schedule(p, kind="helix")
    assert s.makespan > 0
    with pytest.raises(sc.ScheduleError, match="attention"):
        s.to_csv()


def test_capacity_and_recomputation_from_python(tmp_path):
    stages = [sc.Stage(activation=2.0, weight_grad=1.0, recomputed=0.5,
                       params=1.0, selective=1.0, selective_cost=0.25,
                       name=f"s{k}") for k in range(2)]
    problem = sc.Problem(ranks=2, microbatches=4, stages=stages, capacity=4.0)
    fitted = sc.schedule(problem, kind="1f1b")
    assert max(fitted.peak_memory) <= 4.0
    assert any(mode != "none" for row in fitted.recompute for mode in row)
    with pytest.raises(sc.ScheduleError, match="with recompute=none, rank 0 "
                       "peaks at 5 .*above its capacity 4; recompute=auto "
                       "fits"):
        sc.schedule(problem, kind="1f1b", recompute="none")
    with pytest.raises(sc.ScheduleError, match="recompute='often' is not one"):
        sc.schedule(problem, kind="1f1b", recompute="often")
    # The spec keeps capacity, params and the selective option.
    path = tmp_path / "p.mlir"
    path.write_text(problem.to_mlir())
    loaded = sc.load(str(path))
    assert loaded.capacity == 4.0
    assert loaded.stages[1].params == 1.0
    assert loaded.stages[1].selective == 1.0
    assert loaded.stages[1].selective_cost == 0.25
    # A table set by hand is verified and held to the capacity.
    none = [["none"] * 4, ["none"] * 4]
    with pytest.raises(sc.ScheduleError, match="above its capacity"):
        fitted.with_recompute(none)


def test_microbatches_of_different_lengths(tmp_path):
    # Lengths 1 and 3 around the reference 2: microbatch 0 costs half the
    # stage's figures, microbatch 1 one and a half (GPipe: 10.5, as in
    # test/passes/pipe-simulate-lengths.mlir).
    stages = [sc.Stage(activation=2.0, weight_grad=2.0, name=f"s{k}")
              for k in range(2)]
    p = sc.Problem(ranks=2, microbatches=2, stages=stages)
    p.lengths = [1.0, 3.0]
    p.reference_length = 2.0
    s = sc.schedule(p, kind="gpipe")
    assert s.makespan == pytest.approx(10.5)
    assert s.peak_memory[0] == pytest.approx(4.0)
    # Quadratic scaling: (l + l^2) / (2 + 4) on the second stage.
    p.stages[1].scaling_quadratic = 1.0
    assert sc.schedule(p, kind="gpipe").makespan > 10.5
    # The spec keeps the lengths and the scaling.
    path = tmp_path / "lengths.mlir"
    path.write_text(p.to_mlir())
    loaded = sc.load(str(path))
    assert loaded.lengths == [1.0, 3.0]
    assert loaded.reference_length == 2.0
    assert loaded.stages[1].scaling_quadratic == 1.0
    with pytest.raises(sc.ScheduleError, match="lengths gives 1 lengths for 2 "
                       "microbatches"):
        bad = sc.Problem(ranks=2, microbatches=2, stages=stages)
        bad.lengths = [1.0]
        bad.validate()


def test_auto_may_reorder_microbatches():
    # One long microbatch among short ones (test/passes/Inputs/long-tail.mlir):
    # auto runs them in another order, says which, and its problem is in
    # that order.
    lengths = [512, 512, 8192, 512, 1024, 512, 2048, 512]
    p = sc.Problem(ranks=4, microbatches=8, latency=0.02,
                   stages=[sc.Stage(activation=1.0, weight_grad=0.5)
                           for _ in range(4)])
    p.lengths = [float(l) for l in lengths]
    p.reference_length = 1024.0
    given = sc.schedule(p, kind="zb-h1")
    s = sc.schedule(p, kind="auto", time_limit=1.0, memory_limit=14.0)
    assert sorted(s.microbatch_order) == list(range(8))
    assert s.problem.lengths == [float(lengths[k]) for k in s.microbatch_order]
    assert s.makespan < given.makespan


def test_branching_pipeline(tmp_path):
    # The diamond of test/passes/Inputs/diamond.mlir: src feeds a0 -> a1 and
    # b0 (twice as long); join takes a1 and b0. Its figures match the
    # dialect's (test/passes/pipe-schedule-graph.mlir), the chain kinds
    # refuse it, the spec keeps the graph, torch refuses it.
    def st(name, cost, inputs=None):
        s = sc.Stage(forward=cost, backward_input=cost, backward_weight=cost,
                     name=name)
        s.inputs = inputs
        return s
    stages = [st("src", 1.0), st("a0", 1.0), st("a1", 1.0),
              st("b0", 2.0, [0]), st("join", 1.0, [2, 3]), st("head", 1.0)]
    p = sc.Problem(ranks=4, microbatches=6, latency=0.1, stages=stages)
    assert not p.is_chain()
    assert p.stages[4].inputs == [2, 3]
    assert sc.schedule(p, kind="1f1b").makespan == pytest.approx(60.6)
    # Within a second auto reaches 39.1 on this machine; 39.2 at most.
    assert sc.schedule(p, kind="auto", time_limit=1.0).makespan <= 39.2 + 1e-9
    with pytest.raises(sc.ScheduleError, match="is built on a chain"):
        sc.schedule(p, kind="zb-v")
    path = tmp_path / "diamond.mlir"
    path.write_text(p.to_mlir())
    assert "pipe.stage @join inputs(@a1, @b0)" in path.read_text()
    loaded = sc.load(str(path))
    assert loaded.stages[3].inputs == [0]
    assert loaded.stages[4].inputs == [2, 3]
    assert loaded.stages[5].inputs is None
    with pytest.raises(sc.ScheduleError, match="@b: input @b is not a stage "
                       "written before it"):
        sc.Problem(ranks=2, microbatches=2,
                   stages=[st("a", 1.0), st("b", 1.0, [1])]).validate()


def test_a_fused_backward_cost_is_what_the_fused_kinds_pay():
    # A runtime whose split backward costs twice its fused one: 1f1b pays
    # the fused B, zb-h1 pays I + W, and auto does not split.
    p = sc.Problem(ranks=2, microbatches=4,
                   stages=[sc.Stage(fused_backward=1.0) for _ in range(2)])
    one_f = sc.schedule(p, kind="1f1b")
    assert one_f.busy == [pytest.approx(4 * 2.0)] * 2
    assert sc.schedule(p, kind="zb-h1").busy == [pytest.approx(4 * 3.0)] * 2
    best = sc.schedule(p, kind="auto")
    assert best.makespan <= one_f.makespan + 1e-9
    assert best.lower_bound <= best.makespan + 1e-9
    # The spec format has no field for it: a comment says so.
    assert "// @s0: fused_backward = 1.0" in p.to_mlir()
    with pytest.raises(sc.ScheduleError, match="fused_backward"):
        sc.schedule(sc.Problem(ranks=2, microbatches=2, stages=[
            sc.Stage(fused_backward=-1.0), sc.Stage()]), kind="1f1b")


def test_links_carry_each_stages_output_at_their_bandwidth():
    # 1f1b on 2 ranks, one node: each of the 8 transfers on the critical
    # chain takes 0.05 + 2.0 / 20.0 instead of the problem's latency 0.
    stages = [sc.Stage(), sc.Stage()]
    for s in stages:
        s.output = 2.0
    p = sc.Problem(ranks=2, microbatches=4, stages=stages)
    plain = sc.schedule(p, kind="1f1b").makespan
    p.links = (2, (0.05, 20.0), (0.05, 20.0))
    assert p.links == (2, (0.05, 20.0), (0.05, 20.0))
    assert sc.schedule(p, kind="1f1b").makespan == pytest.approx(
        plain + 4 * (0.05 + 2.0 / 20.0))
    text = p.to_mlir()
    assert "output(2.0)" in text and "links(node = 2" in text
    assert "latency(" not in text  # the spec takes latency or links
    p.links = (2, (0.05, 0.0), (0.05, 20.0))
    with pytest.raises(sc.ScheduleError, match="bandwidth"):
        sc.schedule(p, kind="1f1b")
    p.links = None
    assert sc.schedule(p, kind="1f1b").makespan == plain


def test_a_receive_overhead_is_spent_before_each_compute_fed_from_across():
    # gpipe on 2 ranks: rank 1's forwards after its first find their inputs
    # there and still spend the receive overhead after the previous one;
    # rank 0's forwards receive nothing and run back to back.
    p = sc.Problem(ranks=2, microbatches=4, latency=0.1,
                   stages=[sc.Stage() for _ in range(2)])
    p.receive_overhead = 0.3
    s = sc.schedule(p, kind="gpipe")
    one = s.timeline(1)
    assert one[0][:2] == ("1F0", pytest.approx(1.1))
    assert [b for _, b, _ in one[1:4]] == [
        pytest.approx(e + 0.3) for _, _, e in one[0:3]]
    zero = s.timeline(0)
    assert [b for _, b, _ in zero[1:4]] == [
        pytest.approx(e) for _, _, e in zero[0:3]]
    assert "// receive_overhead = 0.3" in p.to_mlir()
    p.receive_overhead = float("nan")
    with pytest.raises(sc.ScheduleError, match="receive_overhead"):
        sc.schedule(p, kind="gpipe")


def test_a_message_overhead_is_charged_to_each_compute_that_sends_across():
    # 1f1b on 2 ranks: rank 0's forwards and rank 1's backwards each send
    # one message to the other rank.
    p = sc.Problem(ranks=2, microbatches=4,
                   stages=[sc.Stage() for _ in range(2)])
    plain = sc.schedule(p, kind="1f1b").busy
    p.message_overhead = 0.5
    charged = sc.schedule(p, kind="1f1b").busy
    assert charged == [pytest.approx(b + 4 * 0.5) for b in plain]
    assert "// message_overhead = 0.5" in p.to_mlir()
    p.message_overhead = -1.0
    with pytest.raises(sc.ScheduleError, match="message_overhead"):
        sc.schedule(p, kind="1f1b")


def uneven_problem(rng, ranks, n, n_mb, fused=True, lengths=False):
    """n stages with random costs, some with a fused backward, message
    overheads and outputs: every field a plan file must keep."""
    stages = []
    for k in range(n):
        i, w = rng.uniform(0.5, 2.0), rng.uniform(0.3, 1.5)
        s = sc.Stage(forward=rng.uniform(0.5, 2.0), backward_input=i,
                     backward_weight=w, activation=rng.uniform(0.5, 3.0),
                     weight_grad=rng.uniform(0.1, 0.5),
                     fused_backward=(i + w) * rng.uniform(0.5, 1.0)
                     if fused and rng.random() < 0.5 else None)
        s.output = rng.uniform(0.0, 0.2)
        stages.append(s)
    p = sc.Problem(ranks=ranks, microbatches=n_mb, stages=stages,
                   latency=rng.uniform(0.0, 0.2), name="uneven")
    p.message_overhead = rng.uniform(0.0, 0.05)
    p.receive_overhead = rng.uniform(0.0, 0.05)
    if lengths:
        p.lengths = [rng.choice([0.5, 1.0, 2.0]) for _ in range(n_mb)]
        p.reference_length = 1.0
    return p


def same_plan(a, b):
    assert b.to_csv() == a.to_csv()
    assert b.to_csv(comms=True) == a.to_csv(comms=True)
    assert b.makespan == a.makespan
    assert b.peak_memory == a.peak_memory
    assert b.bubble_ratio == a.bubble_ratio
    assert (b.kind, b.choice) == (a.kind, a.choice)
    assert (b.lower_bound, b.memory_aware_bound, b.span_bound) == \
        (a.lower_bound, a.memory_aware_bound, a.span_bound)
    assert b.recompute == a.recompute
    assert b.objective == a.objective
    assert list(b.microbatch_order) == list(a.microbatch_order)
    assert b.problem.to_json() == a.problem.to_json()
    assert (b.lowering, b.transport) == (a.lowering, a.transport)


@pytest.mark.skipif(not shutil.which("stagecraft-translate"),
                    reason="helix's spec needs stagecraft-translate")
def test_a_plan_of_every_kind_saves_loads_and_pickles_exactly(tmp_path):
    # Every kind, on uneven costs with fused backwards and overheads (and
    # lengths and a capacity for auto, which reorders and recomputes): the
    # saved, loaded and pickled plan is the same plan, simulated alike.
    import pickle
    import random
    rng = random.Random(3)
    cases = [(kind, uneven_problem(rng, 2, 4, 4, fused=True), {})
             for kind in FIXED + ["auto", "exact"]]
    cases.append(("auto", uneven_problem(rng, 2, 4, 6, lengths=True),
                  {"time_limit": 1.0}))
    capped = uneven_problem(rng, 2, 2, 4)
    capped.capacity = 2.0 + max(s.activation for s in capped.stages)
    cases.append(("auto", capped, {"time_limit": 1.0}))
    cases.append(("zb-v", uneven_problem(rng, 2, 4, 4), {"objective": "span"}))
    for k, (kind, p, options) in enumerate(cases):
        plan = sc.schedule(p, kind=kind, **options)
        plan.lowering, plan.transport = ("early", "quiet") if k % 2 else \
            (None, None)
        path = tmp_path / f"{k}.json"
        plan.save(path)
        same_plan(plan, sc.load_plan(path))
        same_plan(plan, pickle.loads(pickle.dumps(plan)))
    # helix's attention tasks have no cell in torch's CSV, which holds the
    # schedule in a plan file: saving says so.
    helix = sc.schedule(sc.load(os.path.join(EXAMPLES, "helix.mlir")),
                        kind="helix")
    with pytest.raises(sc.ScheduleError, match="cannot save.*attention"):
        helix.save(tmp_path / "helix.json")
    # A schedule read with its communication keeps it.
    two = sc.Problem(ranks=2, microbatches=1, stages=[sc.Stage(), sc.Stage()])
    read = sc.from_csv(two, "0F0,0SEND_F0,0RECV_B0,0B0\n"
                            "1RECV_F0,1F0,1B0,1SEND_B0\n")
    assert read.has_communication
    same_plan(read, sc.plan_from_json(read.to_json()))


def test_problem_json_keeps_the_fused_backward_and_the_overheads():
    # The defect: to_json dropped fused_backward, so a plan read back
    # against the JSON's problem simulated 231 ms instead of 192.
    stages = [sc.Stage(forward=7.52, backward_input=8.69, backward_weight=9.87,
                       fused_backward=14.01, activation=3.07, weight_grad=3.01),
              sc.Stage(forward=7.57, backward_input=8.57, backward_weight=9.71,
                       fused_backward=14.01, activation=3.07, weight_grad=3.01)]
    p = sc.Problem(ranks=2, microbatches=8, stages=stages, latency=0.061)
    p.message_overhead, p.receive_overhead = 0.01, 0.02
    back = sc.problem_from_json(p.to_json())
    assert [s.fused_backward for s in back.stages] == [14.01, 14.01]
    assert (back.message_overhead, back.receive_overhead) == (0.01, 0.02)
    plan = sc.schedule(p, kind="1f1b")
    again = sc.from_csv(back, plan.to_csv())
    assert again.makespan == plan.makespan
    import pickle
    assert pickle.loads(pickle.dumps(p)).to_json() == p.to_json()
    s = pickle.loads(pickle.dumps(stages[0]))
    assert (s.forward, s.fused_backward, s.weight_grad) == (7.52, 14.01, 3.01)


def test_a_plan_file_that_is_wrong_is_refused_naming_why(tmp_path):
    import json
    plan = sc.schedule(problem(2, 4), kind="zb-v")
    state = json.loads(plan.to_json())
    bad = {
        "not a plan file": dict(state, format="stagecraft-problem"),
        "version 2 is not 1": dict(state, version=2),
        "key \"colour\" unknown": dict(state, colour=1),
        "key \"schedule\" missing": {k: v for k, v in state.items()
                                     if k != "schedule"},
        "saved with makespan": dict(state, simulated=dict(
            state["simulated"], makespan=state["simulated"]["makespan"] + 1)),
        "duplicate forward": dict(state, schedule=state["schedule"].replace(
            "0F1", "0F0", 1)),
    }
    for expected, content in bad.items():
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(content))
        with pytest.raises(sc.ScheduleError) as e:
            sc.load_plan(path)
        message = str(e.value)
        assert "plan file" in message, message
        if expected != "not a plan file":
            assert expected in message or expected.split()[0] in message, \
                (expected, message)
    with pytest.raises(sc.ScheduleError, match="cannot read plan file"):
        sc.load_plan(tmp_path / "missing.json")


def test_auto_stays_within_1f1bs_peak_without_a_memory_limit():
    # Over a grid of random problems, one and two stages a rank: with no
    # memory limit, auto's peak on every rank is within 1F1B's highest
    # per-rank peak, the default the docs promise.
    import random
    rng = random.Random(17)
    for seed in range(16):
        ranks = rng.choice([2, 3, 4])
        n = ranks * rng.choice([1, 2])
        n_mb = ranks * rng.choice([1, 2, 3])
        p = uneven_problem(rng, ranks, n, n_mb)
        limit = sc.default_memory_limit(p)
        one = sc.schedule(p, kind="1f1b") if n == ranks else None
        if one is not None:
            assert limit == pytest.approx(max(one.peak_memory))
        found = sc.schedule(p, kind="auto", time_limit=0.3)
        assert max(found.peak_memory) <= limit * (1 + 1e-9), (seed, found.choice)
    capped = problem(2, 4)
    capped.capacity = 100.0
    assert sc.default_memory_limit(capped) is None


POLICIES = os.path.join(EXAMPLES, "policies")


def test_policies_from_the_library_equal_their_kinds():
    # The library's phases policies instantiate to the kinds' orders on a
    # grid; the rules version of 1F1B to 1F1B's order on uniform costs.
    for name, kind, per_rank in (("1f1b", "1f1b", 1), ("gpipe", "gpipe", 1),
                                 ("1f1b-rules", "1f1b", 1),
                                 ("interleaved-1f1b", "interleaved-1f1b", 2)):
        policy = sc.Policy.from_file(os.path.join(POLICIES, f"{name}.policy"))
        for ranks in (2, 3, 4):
            for n_mb in (ranks, 2 * ranks):
                p = problem(ranks, n_mb, stages_per_rank=per_rank, w=1.0)
                ours = sc.schedule(p, policy=policy)
                theirs = sc.schedule(p, kind=kind)
                assert ours.to_csv() == theirs.to_csv(), (name, ranks, n_mb)
                assert (ours.kind, ours.choice) == ("policy", policy.name)


def test_phases_take_rules_and_overlap():
    # Phases and a rule together (zb-h1-phases: 1F1B's F and I order, W
    # filling its waits) reach the zb-h1 kind's makespan on uniform costs;
    # X in a pattern overlaps a forward with a backward (torch's
    # OVERLAP_F_B cell) and, where F&B costs less than F + B, beats the
    # interleaved kind it extends.
    zb = sc.Policy.from_file(os.path.join(POLICIES, "zb-h1-phases.policy"))
    for ranks in (2, 4):
        p = problem(ranks, 2 * ranks, stages_per_rank=1, w=1.0)
        assert sc.schedule(p, policy=zb).makespan == pytest.approx(
            sc.schedule(p, kind="zb-h1").makespan)
    overlap = sc.Policy.from_file(
        os.path.join(POLICIES, "interleaved-1f1b-overlap.policy"))
    p = problem(4, 8, stages_per_rank=2)
    for stage in p.stages:
        stage.forward_backward = 2.2
    ours = sc.schedule(p, policy=overlap)
    assert "OVERLAP_F_B" in ours.to_csv()
    assert ours.makespan < sc.schedule(p, kind="interleaved-1f1b").makespan
    # Rules start X once the next F and the next B are both ready: on V
    # placement, with zbv's order keys, before the same rules without X.
    with open(os.path.join(POLICIES, "zbv.policy")) as f:
        keys = "".join(line for line in f if line.startswith(
            ("forwards by", "backwards by")))
    rules = "rule B\nrule F when in_flight < 2 * ranks\n"
    with_x = sc.Policy("policy x\nplacement v\n" + keys + "rule X\n" + rules)
    without = sc.Policy("policy b\nplacement v\n" + keys + rules)
    assert "OVERLAP_F_B" in sc.schedule(p, policy=with_x).to_csv()
    assert sc.schedule(p, policy=with_x).makespan < \
        sc.schedule(p, policy=without).makespan
    with pytest.raises(sc.ScheduleError, match="X starts the next F and B"):
        sc.Policy("policy x\nwarmup 1\nsteady F B\nrule X\n")


def test_a_policy_verifies_over_a_family_and_takes_parameters():
    policy = sc.Policy.from_file(os.path.join(POLICIES, "zb-h1-rules.policy"))
    assert policy.params == [("offset", 0, 4, 0)]
    assert policy.verify(ranks=(2, 6), microbatches=(1, 16)) == \
        {"held": 80, "skipped": 0}
    p = problem(4, 8, stages_per_rank=1)
    # A larger offset lets the later ranks hold more: their memory grows,
    # and no rank goes above 1F1B's highest peak.
    plans = [sc.schedule(p, policy=policy, params={"offset": k})
             for k in range(5)]
    held = [sum(plan.peak_memory) for plan in plans]
    assert held == sorted(held) and held[0] < held[-1]
    assert all(max(plan.peak_memory) <= sc.default_memory_limit(p)
               for plan in plans)
    one = sc.schedule(p, policy=policy, params={"offset": 2})
    assert one.choice == "zb-h1-rules offset=2"
    with pytest.raises(sc.ScheduleError, match="parameter offset=9 is "
                       "outside 0..4"):
        sc.schedule(p, policy=policy, params={"offset": 9})
    divisible = sc.Policy(open(os.path.join(POLICIES, "1f1b.policy")).read()
                          + "requires microbatches % ranks == 0\n")
    assert divisible.verify(ranks=(2, 4), microbatches=(1, 8)) == \
        {"held": 4 + 2 + 2, "skipped": 24 - 8}


def test_auto_and_policy_search_take_policies():
    # kind='policy-search' searches the policy's free parameters within
    # 1F1B's peak and names its choice; auto takes the policy as one of its
    # candidates and is never slower than the policy's best setting.
    zb = sc.Policy.from_file(os.path.join(POLICIES, "zb-h1-rules.policy"))
    p = problem(4, 8, stages_per_rank=1)
    p.stages[-1].forward = p.stages[-1].backward_input = 1.6
    searched = sc.schedule(p, "policy-search", policy=zb)
    assert searched.choice.startswith("policy zb-h1-rules offset=")
    assert max(searched.peak_memory) <= sc.default_memory_limit(p) * (1 + 1e-9)
    best = sc.search_policy(p, zb)
    assert searched.makespan == pytest.approx(best.makespan)
    assert best.choice == searched.choice.split(" (")[0][len("policy "):]
    held = sc.schedule(p, "policy-search", policy=zb, params={"offset": 0})
    assert held.choice.startswith("policy zb-h1-rules offset=0 (1 of 1 ")
    # auto's search is time-limited (two runs may differ): the policy is
    # checked against the run it is a candidate of.
    both = sc.schedule(p, "auto", policy=zb, time_limit=0.5)
    assert both.makespan <= best.makespan + 1e-9
    with pytest.raises(sc.ScheduleError, match="searches one policy"):
        sc.schedule(p, "policy-search")
    with pytest.raises(sc.ScheduleError, match="give no kind"):
        sc.schedule(p, "gpipe", policy=zb)


def test_plan_data_parallel_chooses_the_schedule_with_its_reductions():
    # 4 ranks inside 8 replicas: the plan is never slower than 1F1B with
    # torch's rule (the same model, one candidate of the plan), stays above
    # its bound, and says what it chose; bad specifications are one line.
    p = problem(4, 8, stages_per_rank=1)
    grads = [60.0] * 4
    plan = sc.plan_data_parallel(p, 8, grads, latency=0.01, bandwidth=10.0,
                                 time_limit=0.3)
    assert plan["bound"] <= plan["step"] + 1e-9
    assert len(plan["exposed"]) == 4 and plan["shift"] == 0.0
    assert plan["schedule"].choice == \
        f"{plan['choice']}; {plan['placement']}"
    one = sc.schedule(p, "1f1b")
    # 1F1B under torch's rule: rank 0 reduces after its last backward.
    reduce = 2 * 7 * (0.01 + 60.0 / 8 / 10.0)
    assert plan["step"] <= one.makespan + reduce + 1e-9
    sharded = sc.plan_data_parallel(p, 8, grads, sharding="full",
                                    latency=0.01, bandwidth=10.0,
                                    time_limit=0.3)
    assert sharded["shift"] > 0.0
    with pytest.raises(sc.ScheduleError, match="shard group of 3 does not "
                       "divide the data-parallel degree 8"):
        sc.plan_data_parallel(p, 8, grads, sharding="hybrid", shard_group=3)
    with pytest.raises(sc.ScheduleError, match="gradient bytes for 2 stages"):
        sc.plan_data_parallel(p, 8, grads[:2])
    with pytest.raises(sc.ScheduleError, match="sharding 'zero'"):
        sc.plan_data_parallel(p, 8, grads, sharding="zero")


def test_bad_policies_raise_located_errors(tmp_path):
    with pytest.raises(sc.ScheduleError, match="line 2, column 13: unknown "
                       "name 'stagee'"):
        sc.Policy("policy x\nrule F when stagee > 1\nrule B\n")
    bad = tmp_path / "bad.policy"
    bad.write_text("policy x\nwarmup 1\nsteady F Q\n")
    with pytest.raises(sc.ScheduleError, match="bad.policy: line 3: 'Q' is "
                       "not an action"):
        sc.Policy.from_file(bad)
    never = sc.Policy("policy never\nrule B\nrule F when in_flight < 0\n")
    with pytest.raises(sc.ScheduleError, match="policy never at ranks=2 "
                       "microbatches=4 stages=2: no rank can start"):
        sc.schedule(problem(2, 4, stages_per_rank=1), policy=never)
    with pytest.raises(sc.ScheduleError, match="give no kind"):
        sc.schedule(problem(2, 4), kind="zb-v", policy=never)


def test_partition_layers_cuts_the_chain_and_its_stages_sum_the_layers():
    layers = []
    for i, f in enumerate((1.0, 4.0, 1.0, 1.0, 3.0, 2.0)):
        layer = sc.Stage(forward=f, backward_input=f, backward_weight=f,
                         activation=f, weight_grad=0.5, params=10.0 * f)
        layer.output = float(i + 1)
        layers.append(layer)
    first, stages = sc.partition_layers(layers, 3)
    assert first[0] == 0 and first[-1] == len(layers) and len(first) == 4
    # The slowest stage is the least any cut gives: 3 * max stage sum.
    sums = [sum(l.forward for l in layers[first[s]:first[s + 1]])
            for s in range(3)]
    assert max(sums) == 5.0
    # A given cut sums its layers as partition_layers' own stages do.
    again = sc.stages_from_partition(layers, first)
    for mine, theirs in zip(again, stages):
        assert (mine.name, mine.forward, mine.params, mine.output,
                mine.layers) == (theirs.name, theirs.forward, theirs.params,
                                 theirs.output, theirs.layers)
    other = sc.stages_from_partition(layers, [0, 1, 6])
    assert [s.forward for s in other] == [1.0, 11.0]
    assert [s.weight_grad for s in other] == [0.5, 2.5]
    assert [s.output for s in other] == [1.0, 6.0]
    assert [s.layers for s in other] == [1, 5]
    for bad in ([0, 0, 6], [0, 3], [1, 6], [0, 4, 3, 6]):
        with pytest.raises(sc.ScheduleError, match="stages_from_partition"):
            sc.stages_from_partition(layers, bad)


def test_load_brings_the_specs_data_parallelism_without_a_warning(tmp_path):
    spec = tmp_path / "dp.mlir"
    spec.write_text(
        "pipe.pipeline @dp ranks(2) microbatches(2) "
        "data_parallel(degree = 2) {\n"
        "  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, "
        "backward_weight = 1.0) gradient(2.0)\n"
        "  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, "
        "backward_weight = 1.0) gradient(3.0)\n}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        problem = sc.load(str(spec))
        dp = sc.load_data_parallel(str(spec))
    assert problem.ranks == 2 and len(problem.stages) == 2
    assert dp == {"degree": 2, "grad_bytes": [2.0, 3.0], "sharding": "none",
                  "shard_group": 1, "latency": 0.0, "bandwidth": 1.0,
                  "inter_latency": 0.0, "inter_bandwidth": 1.0,
                  "optimizer_per_byte": 0.0}
