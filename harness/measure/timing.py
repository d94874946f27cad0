"""Timers: calls per second on the CPU-time and wall clocks, interleaved rounds, µs per call, chunked runs.

Nothing here knows what is timed: a contender is a no-argument callable (or, for
`run_for`, a callable returning two counts, such as env steps and frames).

Two clocks (`CLOCKS`): the process's CPU time (``time.process_time``: what the work
costs, insensitive to other processes competing for the cores) and the wall clock
(``time.perf_counter``). Interleaved rounds (`interleaved`) give every contender a
round in turn and reverse the order every other round, so that slow drift and bursts
of load from other processes hit all contenders alike.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Iterator, Sequence

#: The clocks every round is timed on: the process's CPU time (``time.process_time``: what the
#: work costs, insensitive to other processes competing for the cores) and wall-clock time.
CLOCKS = ("cpu", "wall")


def round_rates(fn: Callable[[], Any], seconds: float, batch: int = 1, min_calls: int = 1) -> dict[str, float]:
    """Calls per CPU-second and per wall-clock second of ``fn`` over one round of about ``seconds`` (wall).

    ``fn`` is called ``batch`` times between two looks at the clock, until at least ``min_calls``
    calls were made and ``seconds`` have passed.

    Returns:
        ``{"cpu": calls per CPU-second, "wall": calls per second}``.
    """
    n, wall0, cpu0 = 0, time.perf_counter(), time.process_time()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        wall = time.perf_counter() - wall0
        if n >= min_calls and wall >= seconds:
            cpu = max(time.process_time() - cpu0, 1e-9)
            return {"cpu": n / cpu, "wall": n / wall}


def calls_per_s(fn: Callable[[], Any], seconds: float, rounds: int = 1, warmup: int = 0, batch: int = 1) -> float:
    """The median over ``rounds`` of the wall-clock calls/s of ``fn``, each round about ``seconds`` long.

    Args:
        fn: a no-argument callable.
        seconds: the length of one round.
        rounds: rounds to take the median of.
        warmup: calls before the first round.
        batch: calls between two looks at the clock (for calls of a few µs).
    """
    for _ in range(warmup):
        fn()
    return statistics.median(round_rates(fn, seconds, batch)["wall"] for _ in range(rounds))


def interleaved(names: Sequence[str], rounds: int) -> Iterator[str]:
    """The contenders' turns over ``rounds`` rounds: ``names`` in order, then reversed, and so on."""
    names = list(names)
    for r in range(rounds):
        yield from (names if r % 2 == 0 else names[::-1])


def interleaved_rates(fns: dict[str, Callable[[], Any]], seconds: float, rounds: int,
                      warmup: int = 3) -> dict[str, dict[str, list[float]]]:
    """Per contender and clock, its calls/s in each of ``rounds`` interleaved rounds of ``seconds / rounds``.

    Each contender is called ``warmup`` times first. The order of the contenders is
    reversed every other round, so that none always runs right after another.

    Args:
        fns: contender name -> a no-argument callable.
        seconds: the (wall-clock) time each contender gets in all.
        rounds: the number of rounds (>= 1).
        warmup: calls per contender before the first round.

    Returns:
        ``{name: {"cpu": [calls per CPU-second of round 0, ...], "wall": [calls per second, ...]}}``.

    Raises:
        ValueError: when ``fns`` is empty, ``seconds`` is not positive or ``rounds`` < 1.
    """
    if not fns:
        raise ValueError("interleaved_rates: fns must name at least one contender; got none")
    if not seconds > 0:
        raise ValueError(f"interleaved_rates: seconds must be positive; got {seconds!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"interleaved_rates: rounds must be an int >= 1; got {rounds!r}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    rates: dict[str, dict[str, list[float]]] = {name: {clock: [] for clock in CLOCKS} for name in fns}
    for name in interleaved(list(fns), rounds):
        for clock, rate in round_rates(fns[name], seconds / rounds, min_calls=2).items():
            rates[name][clock].append(rate)
    return rates


def time_us(fn: Callable[[], Any], seconds: float, rounds: int = 9) -> float:
    """The least over ``rounds`` of the mean µs per call of ``fn`` (about ``seconds`` in all, after a warm-up).

    The least round, as `timeit` advises: on a shared machine other load only ever adds time.
    """
    for _ in range(5):
        fn()
    start, n = time.perf_counter(), 0
    while n < 5 or time.perf_counter() - start < 0.05:
        fn()
        n += 1
    per_call = (time.perf_counter() - start) / n
    number = max(1, int(seconds / rounds / per_call))
    means = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        means.append((time.perf_counter() - t0) / number * 1e6)
    return min(means)


def run_for(chunk: Callable[[], tuple[int, int]], seconds: float) -> tuple[int, int, float, float]:
    """Calls ``chunk`` until ``seconds`` (wall clock) have passed, adding up the two counts it returns.

    Returns:
        ``(first count, second count, wall seconds, CPU seconds)``, e.g. env steps and frames.
    """
    a = b = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        da, db = chunk()
        a, b = a + da, b + db
        wall = time.perf_counter() - wall0
        if wall >= seconds:
            return a, b, wall, max(time.process_time() - cpu0, 1e-9)


class CpuTimedCalls:
    """Delegates to an object, adding up the CPU seconds spent in its methods named in `TIMED`.

    Every other attribute is the wrapped object's, unchanged. Subclasses name the methods.

    Attributes:
        seconds: ``{method: process CPU seconds}`` since construction or the last `reset`.
    """

    TIMED: tuple[str, ...] = ()

    def __init__(self, target: Any) -> None:
        self._target = target
        self.seconds = dict.fromkeys(self.TIMED, 0.0)

    def reset(self) -> None:
        """Sets the accumulated seconds back to zero."""
        self.seconds = dict.fromkeys(self.TIMED, 0.0)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name not in self.TIMED:
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return value(*args, **kwargs)
            finally:
                self.seconds[name] += time.process_time() - start
        return timed
