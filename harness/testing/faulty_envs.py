"""Environments that fail on purpose, for fault tests of executors that run environments in other processes.

`CrashingCartPole` is CartPole-v1 whose ``step`` raises ``RuntimeError`` once the environment has taken
``crash_after`` steps, in exactly one of all the environments sharing a ``marker`` path: the first to get
there creates the marker file (atomically) and raises; every other one, and every environment made after
(a restarted worker's), runs on. A worker in another process (a Ray actor, a TF task) makes it by its
module-qualified id, which gymnasium imports first::

    gymnasium.make("harness.testing.faulty_envs:CrashingCartPole-v1", crash_after=300, marker="/tmp/x/crashed")

or, in an agent config, ``env: {id: "harness.testing.faulty_envs:CrashingCartPole-v1", kwargs: {...}}``.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium

CRASHING_CARTPOLE = "CrashingCartPole-v1"
#: The message of the planted error, for tests to look for.
CRASH_MESSAGE = "CrashingCartPole: the environment crashed on purpose"


class CrashingCartPole(gymnasium.Wrapper):
    """CartPole-v1 that raises once, after ``crash_after`` of its own steps, across all sharing ``marker``.

    Args:
        crash_after: steps this environment takes before it may raise (positive).
        marker: a file path; it is created by the environment that raises, and its existence keeps every
            other environment from raising.
    """

    def __init__(self, crash_after: int, marker: str, **kwargs: Any) -> None:
        if isinstance(crash_after, bool) or not isinstance(crash_after, int) or crash_after < 1:
            raise ValueError(f"CrashingCartPole: crash_after must be a positive int; got {crash_after!r}")
        if not isinstance(marker, (str, os.PathLike)) or not os.path.isdir(os.path.dirname(os.fspath(marker)) or "."):
            raise ValueError(f"CrashingCartPole: marker must be a file path in an existing folder; got {marker!r}")
        super().__init__(gymnasium.make("CartPole-v1", **kwargs))
        self.crash_after, self.marker, self.steps = int(crash_after), os.fspath(marker), 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps >= self.crash_after and not os.path.exists(self.marker):
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass                       # another environment got there first: it is the one that raises
            else:
                raise RuntimeError(f"{CRASH_MESSAGE} at its step {self.steps} (marker {self.marker})")
        return self.env.step(action)


def make_crashing_cartpole(**kwargs: Any) -> CrashingCartPole:
    """``CrashingCartPole(**kwargs)``: the registered entry point.

    A function, not the class: ``gymnasium.make`` reads an entry point's ``metadata``, and on a
    ``gymnasium.Wrapper`` subclass that is a property (read on the class, a property object), which gymnasium
    1.2 (the version RLlib 2.60 pins, so ``pip install '.[all]'`` or ``'.[peers]'`` gets it) refuses as
    invalid metadata. A function has none to check.
    """
    return CrashingCartPole(**kwargs)


if CRASHING_CARTPOLE not in gymnasium.registry:
    # (CartPole-v1 inside: its 500-step limit)
    gymnasium.register(CRASHING_CARTPOLE, entry_point=make_crashing_cartpole)
