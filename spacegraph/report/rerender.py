"""Drawing a committed run again without measuring: ``spacegraph report --from-json PATH``.

``PATH`` is either a ``report.json`` that `spacegraph.report.writers.write` wrote (every figure is
drawn again from the measured result it keeps in ``Figure.raw``, by its scenario's ``render``;
its command, revision, machine and published baselines are kept), or a measured result on its
own (the JSON a scenario's measuring code returns, e.g. a long IMPALA Pong run), which needs
``--only NAME`` to say which scenario draws it; the revision, machine and date are then read from
the result (`provenance`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.measure.figures import Figure
from spacegraph.report import baselines as baselines_module
from spacegraph.report.registry import Scenario
from spacegraph.report.runner import Report, command

#: The `Report` fields that a report.json holds besides its figures.
_REPORT_KEYS = ("command", "revision", "machine", "versions", "started", "seconds", "load_before", "load_after",
                "max_load", "load_warning", "quick", "seeds", "peers_note", "baselines_note")


def shown_path(path: str | os.PathLike) -> str:
    """``path`` relative to the current directory when it lies below it, else its file name (no local paths)."""
    full = Path(path).resolve()
    try:
        return full.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return full.name


def provenance(result: Mapping[str, Any]) -> dict[str, str]:
    """``{"revision", "machine", "date", "versions"}`` of a measured result, as far as it records them.

    Reads the ``environment`` block of `harness.measure.machine.environment` or the top-level ``commit``,
    ``machine`` (a string or a mapping of platform, CPUs, GPUs and versions), ``machine_name`` and ``date``
    keys.
    """
    env = result.get("environment")
    env = env if isinstance(env, dict) else {}
    revision = env.get("git_revision") or result.get("commit") or result.get("revision") or "unknown"
    machine: Any = result.get("machine")
    if env.get("processor") or env.get("machine"):
        machine = ", ".join(str(env[k]) for k in ("processor", "machine") if env.get(k))
    elif isinstance(machine, dict):  # e.g. {"platform", "cpus", "cuda": [GPU names], "torch", ...}
        gpus = machine.get("cuda") or machine.get("gpus")
        parts = [result.get("machine_name"), machine.get("cpu") or machine.get("processor"), machine.get("platform"),
                 f"{machine['cpus']} CPUs" if machine.get("cpus") else None,
                 f"GPU: {', '.join(gpus)}" if gpus else "no GPU"]
        env = {**{k: v for k, v in machine.items() if isinstance(v, str)}, **env}
        machine = ", ".join(str(p) for p in parts if p)
    return {"revision": str(revision), "machine": str(machine or "unknown"),
            "date": str(env.get("date") or result.get("date") or "unknown"),
            "versions": ", ".join(f"{k} {env[k]}" for k in ("python", "numpy", "tensorflow", "torch") if env.get(k))}


def _redraw(stored: Figure, scenario: Scenario | None) -> Figure:
    if scenario is None or scenario.render is None or not stored.raw:
        return stored
    drawn = [f for f in scenario.render(stored.raw) if f.name == stored.name]
    if not drawn:
        return stored
    fig = drawn[0]
    fig.meta, fig.baselines = stored.meta, stored.baselines
    return fig


def from_report(doc: Mapping[str, Any], scenarios: Mapping[str, Scenario], only: Sequence[str] | None,
                source: str) -> Report:
    """A `Report` from a ``report.json`` document, each figure drawn again (see the module docstring).

    Raises:
        ValueError: naming ``source`` when a figure or a report field is malformed or missing.
    """
    figures = []
    for i, data in enumerate(doc.get("figures") or []):
        try:
            stored = Figure.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"--from-json {source}: figures[{i}]: {exc}") from None
        name = stored.meta.get("scenario", stored.name)
        if only and name not in only:
            continue
        fig = _redraw(stored, scenarios.get(name))
        fig.meta.setdefault("rendered from", f"{source} (drawn again; measured as the lines above say)")
        figures.append(fig)
    missing = [k for k in _REPORT_KEYS if k not in doc and k != "baselines_note"]
    if missing:
        raise ValueError(f"--from-json {source}: a report.json needs {', '.join(missing)}; it lacks them")
    facts = {k: doc.get(k) for k in _REPORT_KEYS}
    commands = {f.meta.get("command") for f in figures}
    if only and len(commands) == 1 and None not in commands:  # one scenario of a larger run: its own command
        facts["command"] = commands.pop()
    return Report(figures=figures, **facts)


def from_result(doc: Mapping[str, Any], scenario: Scenario, source: str,
                baseline_dir: str | os.PathLike | None = None) -> Report:
    """A `Report` of one scenario drawn from its measured result ``doc`` (see the module docstring).

    Raises:
        ValueError: naming ``source`` and the scenario when it cannot draw a result, or the result does not
            have what its drawing needs.
    """
    if scenario.render is None:
        raise ValueError(f"--from-json {source}: scenario {scenario.name!r} cannot draw a result without "
                         "measuring it")
    try:
        figures = scenario.render(dict(doc))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ValueError(f"--from-json {source}: not a result of scenario {scenario.name!r} "
                         f"({type(exc).__name__}: {exc})") from None
    folder = Path(baseline_dir) if baseline_dir else baselines_module.default_dir()
    published = baselines_module.load(folder) if folder else {}
    facts = provenance(doc)
    if facts["revision"] == "unknown" and figures and figures[0].raw:  # e.g. {"runs": [...]}: each run records it
        facts = provenance(figures[0].raw)
    config = doc.get("config")
    seeds = len(config["seeds"]) if isinstance(config, dict) and isinstance(config.get("seeds"), list) else 2
    reproduce = command(False, seeds, [scenario.name], True)
    for fig in figures:
        own = provenance(fig.raw) if fig.raw is not doc and fig.raw else facts
        fig.baselines = list(published.get(fig.name, [])) + fig.baselines
        fig.meta = {"scenario": scenario.name, "command": reproduce, "revision": own["revision"],
                    "machine": own["machine"], "versions": own["versions"],
                    "rendered from": f"{source} (measured {own['date']})",
                    **fig.meta}
    return Report(figures=figures, command=reproduce, revision=facts["revision"],
                  machine={"description": facts["machine"]},
                  versions={"recorded": facts["versions"] or None}, started=facts["date"], seconds=0.0,
                  load_before=[], load_after=[], max_load=0.0, load_warning=None, quick=False, seeds=seeds,
                  peers_note="as the measured result records it (see the notes)",
                  baselines_note=None if published else "no published baselines found")


def rerender(path: str | os.PathLike, scenarios: Mapping[str, Scenario], only: Sequence[str] | None = None,
             baseline_dir: str | os.PathLike | None = None) -> Report:
    """The `Report` of ``path`` (a report.json or one scenario's measured result), drawn without measuring.

    Raises:
        ValueError: naming ``--from-json`` and the file when it cannot be read, is not a JSON object, or is a
            measured result without exactly one ``--only NAME``.
    """
    from harness.execution.serialization import BadFileError, read_json

    source = shown_path(path)
    try:
        doc = read_json(path, "a report.json or a scenario's measured result (a JSON object)")
    except BadFileError as exc:
        raise ValueError(f"--from-json: {exc}") from None
    if "figures" in doc:
        return from_report(doc, scenarios, only, source)
    if not only or len(only) != 1:
        raise ValueError(f"--from-json {source}: this is a measured result, not a report.json; name the scenario "
                         f"that draws it with --only NAME (one of {', '.join(scenarios)})")
    return from_result(doc, scenarios[only[0]], source, baseline_dir)
