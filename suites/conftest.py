"""Suite-wide pytest configuration: hypothesis profiles, framework threads under xdist, and the listener watch
of distributed tests (`loopback_listeners`: nothing they start may listen on another address than loopback).

Profiles: ``dev`` (default, quick), ``ci`` (derandomized, more examples) and
``thorough``. ``ci`` is loaded whenever the ``CI`` environment variable is set to
something other than empty/"0"/"false"; otherwise ``HYPOTHESIS_PROFILE`` names the
profile; otherwise ``dev``.
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, settings

if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers share the cores: one framework thread each (set before TF/torch are imported).
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_var, "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# GraphExecutor's validate mode (docs/architecture.md): every executed input is checked against its
# space in the tests; the benchmarks (asv) leave it off.
os.environ.setdefault("SPACEGRAPH_VALIDATE", "1")

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "dev", max_examples=30, deadline=None, suppress_health_check=_SUPPRESSED
)
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=150,
    deadline=None,
    print_blob=True,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=_SUPPRESSED
)


def _profile_name() -> str:
    ci = os.environ.get("CI", "").strip().lower()
    if ci not in ("", "0", "false"):
        return "ci"
    return os.environ.get("HYPOTHESIS_PROFILE", "").strip() or "dev"


settings.load_profile(_profile_name())


# The learning tests (suites/agents) record env steps to solve, seconds and evaluations with
# record_property("learning", ...); user properties travel from xdist workers to the controller.
def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: D103 - pytest hook
    lines = []
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            for name, value in getattr(report, "user_properties", []):
                if name == "learning" and report.when == "call":
                    lines.append(f"{report.nodeid.split('::')[-1]}: {value}")
    if lines:
        terminalreporter.section("learning results")
        for line in lines:
            terminalreporter.write_line(line)


# Markers that run only when asked for: `pytest -m learning` (or any -m expression naming the
# marker) selects them; a plain `pytest` leaves them out (deselected, listed in the summary count).
# `.ci/run` asks for learning and distributed explicitly, in its own bounded step (docs/testing.md);
# learning-long (hours: the reference runs against published returns) never runs there.
OPT_IN_MARKERS = ("learning", "distributed", "learning-long")


def names_marker(expression: str, marker: str) -> bool:
    """Whether the -m ``expression`` names ``marker`` as a whole word ("learning" is not named by
    "learning-long", nor the reverse)."""
    return re.search(rf"(?<![\w-]){re.escape(marker)}(?![\w-])", expression) is not None


def pytest_collection_modifyitems(config, items):  # noqa: D103 - pytest hook
    expression = config.getoption("markexpr", "") or ""
    keep, dropped = [], []
    for item in items:
        opt_in = [m for m in OPT_IN_MARKERS if item.get_closest_marker(m) is not None]
        if opt_in and not any(names_marker(expression, m) for m in opt_in):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(autouse=True)
def loopback_listeners(request):
    """Tests marked ``distributed``: while the test runs (its fixtures too), every listening socket of this
    process and its descendants is watched (`suites.listeners`); one not bound to loopback that is not a
    documented TensorFlow server fails the test. Yields the `ListenerWatch` (None for other tests)."""
    if request.node.get_closest_marker("distributed") is None:
        yield None
        return
    from suites.listeners import watch_listeners

    yield from watch_listeners()
