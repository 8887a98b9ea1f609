"""The candidates a runner may step with (a lowering and a transport),
`lowering="auto"`'s measured trial of them, and what it logs."""

from __future__ import annotations

import logging
import statistics
import time

import torch
import torch.distributed as dist

from .. import ScheduleError
from . import _transport
from ._lower import _without_idle_scopes


#: Where the trial, the transport and the collectives say what they do.
logger = logging.getLogger("stagecraft.torch")


#: `lowering="auto"`'s trial: single steps of each candidate in turn that
#: warm the runner up uncounted (a runner's first steps run slower,
#: unevenly), then TRIAL_ROUNDS rounds in which each candidate runs
#: TRIAL_BLOCK consecutive steps, the first of them uncounted: a step
#: leaves work behind it (gloo's transport threads still sending), which
#: the next step pays for, so a candidate is timed after steps of its own,
#: as a training loop runs it.
TRIAL_WARMUP = 4


TRIAL_BLOCK = 3


TRIAL_ROUNDS = 5


#: The measured steps of each candidate.
TRIAL_STEPS = TRIAL_ROUNDS * (TRIAL_BLOCK - 1)


#: Steps from a runner's first to the end of a trial of two candidates.
TRIAL_LENGTH = 2 * (TRIAL_WARMUP + TRIAL_ROUNDS * TRIAL_BLOCK)


class _LoweringTrial:
    """`lowering="auto"`'s measured choice between candidates (a lowering
    and a transport) of one plan: `warmup` rounds of one uncounted step of
    each, then `rounds` rounds of `block` consecutive steps of each, the
    first step of a block uncounted; the candidates take turns, their
    order reversed every round (a b, b a, ...) so that neither always
    runs after the other. Every step trains: the candidates differ only in
    when the messages are posted and how gloo's threads share the core."""

    def __init__(self, names: list[str], rounds: int = TRIAL_ROUNDS,
                 block: int = TRIAL_BLOCK, warmup: int = TRIAL_WARMUP):
        self.names = names
        #: The steps in trial order: (candidate, counted).
        self._order: list[tuple[str, bool]] = []
        for k in range(warmup):
            self._order += [(n, False) for n in
                            (names if k % 2 == 0 else names[::-1])]
        for k in range(rounds):
            for n in (names if (warmup + k) % 2 == 0 else names[::-1]):
                self._order += [(n, j > 0) for j in range(block)]
        self._at = 0
        self.times: dict[str, list[float]] = {n: [] for n in names}

    def next(self) -> str:
        return self._order[self._at][0]

    def record(self, name: str, seconds: float) -> None:
        if self._order[self._at][1]:
            self.times[name].append(seconds)
        self._at += 1

    def finished(self) -> bool:
        return self._at == len(self._order)

    def medians(self) -> list[float]:
        return [statistics.median(self.times[n]) for n in self.names]


def _faster_lowering(slowest: dict[str, float]) -> str:
    """The lowering with the shortest step (slowest rank's median); a tie
    goes to the first tried."""
    return min(slowest, key=slowest.get)


#: The `transport`s `schedule` takes.
TRANSPORTS = ("auto", "quiet", "shared")


def _check_choice(option: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise ScheduleError(f"{option}={value!r}: expected one of "
                            + ", ".join(repr(x) for x in allowed))


def _quiet_blocker(tids: list[int], group) -> str | None:
    """Why this rank cannot run the quiet transport for `group`, or None."""
    if group is not None and dist.is_initialized() and \
            dist.get_backend(group) != "gloo":
        return (f"the pipeline's process group runs on "
                f"{dist.get_backend(group)}, not gloo")
    if not tids:
        return "this process has no gloo transport thread to quiet"
    if not _transport.restorable(tids):
        return ("this process may not restore its gloo transport threads' "
                "priority after a step (it needs CAP_SYS_NICE or a "
                "RLIMIT_NICE of 20)")
    return None


def _transports(transport: str, blocker: str | None) -> list[str]:
    """The transports `transport` lets run, in trial order: "quiet" only
    where nothing blocks it (`_quiet_blocker`, agreed by every rank);
    "auto" tries both there."""
    _check_choice("transport", transport, TRANSPORTS)
    if transport == "quiet" and blocker is not None:
        raise ScheduleError(f"transport='quiet': {blocker}; use "
                            "transport='shared'")
    if transport == "auto":
        return ["shared"] if blocker is not None else ["shared", "quiet"]
    return [transport]


def _candidate_name(lowering: str, transport: str) -> str:
    """A trial candidate's name: the lowering, "+quiet" with the quiet
    transport ("early", "torch+quiet")."""
    return lowering + ("+quiet" if transport == "quiet" else "")


class _CandidateRunner:
    """What Stagecraft's runners of torch's schedules share: the candidates
    that may run a step (a lowering and a transport, `_candidate_name`),
    `lowering="auto"`'s trial of them, the quiet transport, and the step
    without torch's idle profiler scopes. Mixed in before one of torch's
    schedule classes; `_use_lowering` loads a lowering."""

    def _init_candidates(self, stage, lowerings: list[str],
                         transport: str) -> None:
        # gloo's transport threads, and the transports that may run: the
        # quiet one only where no rank is blocked from it (the ranks
        # agree, so that every rank tries the same candidates).
        self._transport_tids = _transport.transport_threads()
        blocker = _quiet_blocker(self._transport_tids, stage.group)
        if transport != "shared" and dist.is_initialized():
            blocked = torch.tensor([float(blocker is not None)],
                                   device=stage.device)
            dist.all_reduce(blocked, op=dist.ReduceOp.MAX, group=stage.group)
            if blocked.item() and blocker is None:
                blocker = "another rank of the pipeline cannot quiet its own"
        transports = _transports(transport, blocker)
        self._trial_stage = stage
        #: Every (lowering, transport) that may run, by its trial name.
        self._candidates = {_candidate_name(low, t): (low, t)
                            for low in lowerings for t in transports}
        names = list(self._candidates)
        self._use(names[0])
        #: The lowering and the transport that run ("shared": gloo's
        #: transport threads as torch leaves them; "quiet": at idle
        #: priority during each step): None while "auto"'s trial runs.
        self.stagecraft_lowering: str | None = None
        self.stagecraft_transport: str | None = None
        #: Per candidate tried (a lowering, "+quiet" with the quiet
        #: transport), the slowest rank's median step ms.
        self.stagecraft_lowering_ms: dict[str, float] = {}
        self._trial = _LoweringTrial(names) if len(names) > 1 else None
        self._said_quiet = False
        self._rank = stage.group_rank
        if self._trial is None:
            self._keep(names[0])
            logger.info("rank %d: runs lowering %r with transport %r (no "
                        "trial)", self._rank, *self._candidates[names[0]])
        else:
            logger.info(
                "rank %d: trial of %d candidates (%s) over the next %d "
                "training steps (%d measured of each; forward-only steps "
                "do not count)%s", self._rank, len(names), ", ".join(names),
                len(self._trial._order), TRIAL_STEPS,
                "" if transport == "shared" else
                "; the +quiet candidates set gloo's transport threads to "
                "idle priority (SCHED_IDLE) during their steps")
            if blocker is not None and transport == "auto":
                logger.info("rank %d: no quiet transport: %s", self._rank,
                            blocker)
        # True keeps torch's idle profiler scopes (a benchmark's control).
        self._keep_scopes = False

    def _use_lowering(self, lowering: str) -> None:
        """Loads `lowering` for the next step (none to load: the class's
        own step loop posts its messages)."""

    def _use(self, name: str) -> None:
        """Runs the candidate `name` from the next step on."""
        lowering, transport = self._candidates[name]
        self._use_lowering(lowering)
        self._quiet = transport == "quiet"

    def _keep(self, name: str) -> None:
        """Runs the candidate `name` from now on, and says so (here and in
        the plan, which a saved plan then carries)."""
        self._use(name)
        self.stagecraft_lowering, self.stagecraft_transport = \
            self._candidates[name]
        self.stagecraft_plan.lowering = self.stagecraft_lowering
        self.stagecraft_plan.transport = self.stagecraft_transport

    def _step_microbatches(self, *args, **kwargs):
        # A forward-only step (`eval`) is no trial step: it runs the
        # candidate now loaded.
        trial = self._trial if self._has_backward else None
        if trial is not None:
            name = trial.next()
            self._use(name)
        if self._quiet and not self._said_quiet:
            self._said_quiet = True
            logger.info("rank %d: gloo's transport threads %s run at idle "
                        "priority (SCHED_IDLE) during each step of the quiet "
                        "transport, restored after it", self._rank,
                        self._transport_tids)
        start = time.perf_counter()
        with _without_idle_scopes(self._keep_scopes), \
                _transport.quiet(
                    self._transport_tids if self._quiet else []):
            out = super()._step_microbatches(*args, **kwargs)
        if trial is not None:
            trial.record(name, time.perf_counter() - start)
            if trial.finished():
                self._keep_faster(trial)
        return out

    def _keep_faster(self, trial: "_LoweringTrial") -> None:
        """Every rank keeps the candidate whose slowest rank's median step
        is the shortest (the ranks agree through one all_reduce)."""
        stage = self._trial_stage
        mine = torch.tensor(trial.medians(), dtype=torch.float64,
                            device=stage.device)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=stage.group)
        slowest = dict(zip(trial.names, mine.tolist()))
        self.stagecraft_lowering_ms = {n: 1e3 * t for n, t in slowest.items()}
        kept = _faster_lowering(slowest)
        self._keep(kept)
        self._trial = None
        logger.info(
            "rank %d: trial done after %d steps; median step of the slowest "
            "rank: %s; kept %s (lowering %r, transport %r)", self._rank,
            len(trial._order),
            ", ".join(f"{n} {ms:.3f} ms" for n, ms in
                      self.stagecraft_lowering_ms.items()),
            kept, self.stagecraft_lowering, self.stagecraft_transport)
