"""Running the selected scenarios in one process, one after the other, and recording where and how.

Every figure gets the command that reproduces it from a fresh clone, the git revision, the
machine (CPU model, cores, memory, GPU), the load average before and after (and the highest
seen while it ran, with a warning above the core count) and the library versions. A scenario
that fails leaves a figure saying so; the others still run and the report is still written.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import os
import re
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import IO, Any, Sequence

from harness.measure import host
from harness.measure.figures import Figure
from harness.measure.machine import configure_threads, git_revision
from harness.measure.progress import Progress
from spacegraph.report import baselines as baselines_module
from spacegraph.report.registry import Context, Scenario

#: Distributions whose versions every figure records (None where not installed).
DISTRIBUTIONS = ("spacegraph", "numpy", "tensorflow", "torch", "gymnasium", "ale-py", "ray")
INSTALL = "python3 -m pip install -e '.[tf,torch,peers]'"


@dataclasses.dataclass
class Report:
    """A finished run: its figures and the facts recorded around it."""

    figures: list[Figure]
    command: str
    revision: str
    machine: dict[str, Any]
    versions: dict[str, str | None]
    started: str
    seconds: float
    load_before: list[float]
    load_after: list[float]
    max_load: float
    load_warning: str | None
    quick: bool
    seeds: int
    peers_note: str | None
    baselines_note: str | None = None


def versions() -> dict[str, str | None]:
    """Installed versions of `DISTRIBUTIONS` (package metadata; nothing is imported)."""
    out: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def short_revision(revision: str) -> str:
    """``abc1234`` (``abc1234-dirty`` for a dirty checkout) of a `git_revision` string; each of a list of them
    (``"2 values: <rev>, <rev>"``, a figure whose runs were measured on several commits) shortened in turn."""
    listed = re.fullmatch(r"\d+ values: (.+)", revision)
    if listed:
        return ", ".join(short_revision(r) for r in listed.group(1).split(", "))
    if revision in ("", "unknown"):
        return "unknown"
    return revision[:7] + ("-dirty" if "dirty" in revision else "")


def default_out_dir(revision: str | None = None) -> Path:
    """``reports/history/<UTC date>-<short revision>/``, relative to the current directory."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return Path("reports") / "history" / f"{date}-{short_revision(revision or git_revision())}"


def command(quick: bool, seeds: int, only: Sequence[str] | None, peers: bool) -> str:
    """The shell command that reproduces a run from a fresh clone (no local or virtual-environment paths)."""
    args = ["spacegraph", "report"]
    if quick:
        args.append("--quick")
    if only:
        args += ["--only", *only]
    args += ["--seeds", str(seeds)]
    if not peers:
        args.append("--no-peers")
    return f"{INSTALL} && {' '.join(shlex.quote(a) for a in args)}"


def peers_missing() -> str | None:
    """Why RLlib cannot be imported (TensorFlow first, see `spacegraph.reports.rllib`), or None."""
    from spacegraph.reports.rllib import rllib_missing

    return rllib_missing("ray.rllib")


def _fmt_load(load: Sequence[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load)


def run(scenarios: Sequence[Scenario], quick: bool = False, seeds: int = 2, peers: bool = True,
        only: Sequence[str] | None = None, baseline_dir: str | Path | None = None,
        stream: IO[str] | None = sys.stderr, threads: int = 1) -> Report:
    """Runs ``scenarios`` in order (see the module docstring) and returns the `Report`.

    Args:
        scenarios: from `spacegraph.report.registry.select`.
        quick: small budgets.
        seeds: seeds for the scenarios that repeat over seeds (>= 1).
        peers: also run RLlib where a scenario has it (left out with a note when not installed).
        only: the names given on the command line (for the reproduce commands).
        baseline_dir: the folder of baseline YAML files (default ``reports/baselines`` of this checkout).
        stream: where the progress bars go (None: nowhere).
        threads: CPU threads per framework (set before anything imports TensorFlow).

    Raises:
        ValueError: for ``seeds`` < 1 or a malformed baseline file.
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"report: seeds must be a positive int; got {seeds!r}")
    folder = Path(baseline_dir) if baseline_dir else baselines_module.default_dir()
    published = baselines_module.load(folder) if folder else {}
    configure_threads(threads)
    peers_note = None
    if peers:
        peers_note = peers_missing()
    else:
        peers_note = "peers not requested (--no-peers)"
    machine = host.facts()
    machine_line = host.describe(machine)
    revision, libs = git_revision(), versions()
    libs_line = ", ".join(f"{k} {v}" for k, v in libs.items() if v) + (
        "; not installed: " + ", ".join(k for k, v in libs.items() if not v) if not all(libs.values()) else "")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before, t0 = list(os.getloadavg()), time.perf_counter()
    max_load = load_before[0]
    figures: list[Figure] = []
    for scenario in scenarios:
        progress = Progress(scenario.name, stream=stream)
        ctx = Context(quick=quick, seeds=seeds, progress=progress, peers=peers and peers_note is None)
        progress.expect(scenario.steps(ctx) + 1)
        before, s0 = os.getloadavg(), time.perf_counter()
        try:
            produced = scenario.run(ctx)
        except Exception as exc:  # a failing scenario must not lose the others' results
            tail = "".join(traceback.format_exception(exc))[-1500:]
            produced = [Figure(name=scenario.name, title=scenario.title, figure_ref=scenario.figure_ref,
                               notes=[f"FAILED: {type(exc).__name__}: {exc}", f"traceback tail: {tail}"])]
        progress.finish()
        after, seconds = os.getloadavg(), time.perf_counter() - s0
        max_load = max(max_load, progress.max_load, after[0])
        for fig in produced:
            if ctx.peers is False and fig.peer_missing is None and peers_note and _has_peer(scenario.name):
                fig.peer_missing = peers_note
            fig.baselines = list(published.get(fig.name, [])) + fig.baselines
            fig.meta.update({
                "scenario": scenario.name, "command": command(quick, seeds, [scenario.name], peers),
                "revision": revision, "machine": machine_line, "versions": libs_line,
                "load": (f"1/5/15-min load average before {_fmt_load(before)}, after {_fmt_load(after)}, highest "
                         f"1-min seen {progress.max_load:.2f} ({machine['cores']} cores)"),
                "duration": f"{seconds:.0f} s", "load_max": progress.max_load,
                "load_warning": host.load_warning([before[0], after[0], progress.max_load], machine["cores"]),
            })
        figures += produced
    seconds = time.perf_counter() - t0
    load_after = list(os.getloadavg())
    return Report(figures=figures, command=command(quick, seeds, only, peers), revision=revision, machine=machine,
                  versions=libs, started=started, seconds=seconds, load_before=load_before, load_after=load_after,
                  max_load=max_load, load_warning=host.load_warning([load_before[0], load_after[0], max_load],
                                                                    machine["cores"]),
                  quick=quick, seeds=seeds, peers_note=peers_note,
                  baselines_note=None if published else "no published baselines found (reports/baselines of a clone, "
                                                        "or --baselines DIR)")


#: Scenarios with a same-run peer (RLlib); the others' peers are hand-written code or none.
_PEER_SCENARIOS = ("sampling", "replay", "frame_replay", "learning", "apex", "impala", "impala_learning")


def _has_peer(name: str) -> bool:
    return name in _PEER_SCENARIOS
