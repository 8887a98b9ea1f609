"""Stagecraft: schedules for pipeline-parallel training.

    import stagecraft as sc
    p = sc.Problem(ranks=4, microbatches=8,
                   stages=[sc.Stage(forward=1.0, backward_input=1.0,
                                    backward_weight=0.5, activation=1.0,
                                    weight_grad=0.5) for _ in range(8)])
    s = sc.schedule(p, kind="zb-v")
    print(s.makespan, s.bubble_ratio, s.peak_memory, s.placement)
    print(s.actions(0))       # torch's spelling: 0F0, 8I3, ...
    print(s.to_csv())         # torch.distributed.pipelining CSV
    print(s.summary())        # what stagecraft-translate --pipe-to-summary prints

Every function calls the C++ library the command-line tools use; every
error raises `ScheduleError` (a `ValueError`) with the library's message.
`stagecraft.torch` runs these schedules in torch.distributed.pipelining.
"""

from ._core import (
    Problem,
    Schedule,
    ScheduleError,
    Stage,
    from_csv,
    kinds,
    load,
    schedule,
)

__all__ = [
    "Problem",
    "Schedule",
    "ScheduleError",
    "Stage",
    "from_csv",
    "kinds",
    "load",
    "schedule",
]
__version__ = "0.3.0"
