"""``python -m harness.testing.mutation_run``: mutation testing of a package folder against a test selection.

For each module under ``--package-dir`` (package ``__init__`` files aside) it lists the
mutants (`harness.testing.mutation.mutants`), optionally draws a random sample of them
(``--sample N --seed S``), and runs per mutant only the tests that exercise that module:
the specs naming a class defined in it or a subclass of one (``--specs``), and the test
files under ``--tests`` whose ``MUTATION_COVERS`` tuple names it, as one ``-k`` expression
of their stems; all of ``--tests`` when none does. Each mutant runs with ``-x`` and a
per-mutant ``--timeout``, one at a time, on each backend of ``--backends`` in turn
(``SPACEGRAPH_BACKENDS`` set to one backend per run; default ``torch,tf``): a later backend
runs only the mutants every earlier one let survive (``--every-backend``: all of them), and a
mutant is killed when any backend's run fails or times out.
Mutants are named by content (``module:Class.method:operator:before -> after``, see
`harness.testing.mutation.content_key`), in ``--mutants`` and ``--equivalent``.
It writes ``OUT.json`` (every outcome) and ``OUT.md`` (kill rate with its 95% Clopper-
Pearson interval, kills by backend, survivors by module and line), and says plainly when it ran a sample.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import yaml

from harness.testing.mutation import (Outcome, mutants, outcomes_from_json, outcomes_json, run_mutant,
                                      run_unmutated, timed)


def _beta_ppf(q: float, a: float, b: float) -> float:
    """Inverse of the regularized incomplete beta function by bisection on its continued fraction."""
    def cdf(x: float) -> float:
        if x <= 0:
            return 0.0
        if x >= 1:
            return 1.0
        ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
        if x > (a + 1) / (a + b + 2):
            return 1.0 - _beta_cf(1 - x, b, a, ln)
        return _beta_cf(x, a, b, ln)
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
    return (lo + hi) / 2


def _beta_cf(x: float, a: float, b: float, ln: float) -> float:
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
            c = 1.0 + num / c
            c = c if abs(c) > 1e-300 else 1e-300
            h *= d * c
    return math.exp(ln) * h / a


def clopper_pearson(killed: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact two-sided binomial confidence interval of ``killed / n``."""
    if n == 0:
        return 0.0, 1.0
    tail = (1 - level) / 2
    lo = 0.0 if killed == 0 else _beta_ppf(tail, killed, n - killed + 1)
    hi = 1.0 if killed == n else _beta_ppf(1 - tail, killed + 1, n - killed)
    return lo, hi


def module_name(path: Path, root: Path) -> str:
    """Dotted name of ``path`` relative to the import root ``root``."""
    return ".".join(path.relative_to(root).with_suffix("").parts)


def spec_stems(module: str, spec_dir: Path) -> list[str]:
    """Stems of the spec files naming a class defined in ``module``, or a subclass of one.

    The named class counts with its ``spec_covers`` and every base class in their MROs, so a
    mutant of a base class (``optimizers/base.py``) runs the specs of its subclasses.
    """
    from harness.specs.loader import import_object

    stems = []
    for path in sorted(spec_dir.glob("*.yaml")):
        target = (yaml.safe_load(path.read_text()) or {}).get("component")
        try:
            cls = import_object(target)
        except Exception:
            continue
        named = [cls, *getattr(cls, "spec_covers", ())] if inspect.isclass(cls) else []
        if any(base.__module__ == module for c in named for base in inspect.getmro(c)):
            stems.append(path.stem)
    return stems


def covering_tests(module: str, tests: Path) -> list[str]:
    """Stems of the ``test_*.py`` files under ``tests`` whose module-level ``MUTATION_COVERS`` names ``module``.

    ``MUTATION_COVERS = ("package.module", ...)`` is read from the file's syntax tree (the file is not
    imported); it declares which modules the file's tests exercise, so that a mutant of one runs them.
    """
    files = [tests] if tests.is_file() else sorted(tests.rglob("test_*.py"))
    return [f.stem for f in files if module in declared_covers(f)]


def declared_covers(path: Path) -> tuple[str, ...]:
    """The ``MUTATION_COVERS`` tuple of a test file (empty when it has none)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MUTATION_COVERS"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{path}: MUTATION_COVERS must be a tuple of dotted module names, got {value!r}")
            return tuple(value)
    return ()


def selection(module: str, tests: Path, spec_dir: Path | None) -> list[str]:
    """The stems whose tests a mutant of ``module`` runs (``-k`` terms); empty: all of ``tests``."""
    return (spec_stems(module, spec_dir) if spec_dir else []) + covering_tests(module, tests)


def backend_counts(outcomes: list[Outcome], backends: Sequence[str] = ()) -> list[str]:
    """Report lines: how many mutants each backend killed first, and which kills only one backend made.

    Args:
        outcomes: the mutants run.
        backends: the run's ``--backends`` in order (default: those the outcomes name).
    """
    order = list(backends) or list(dict.fromkeys(b for o in outcomes for b in o.backends))
    if not order:
        return []
    first = {b: sum(o.killed_by == b for o in outcomes) for b in order}
    runs = {b: sum(b in o.backends for o in outcomes) for b in order}
    lines = ["## Kills by backend", "",
             f"Backends in run order: {', '.join(order)}; a mutant counts as killed when any of them killed it. "
             "Without `--every-backend` a backend runs a mutant only when every earlier one let it survive: a later "
             "backend's kills are then kills only it made, and the first backend's include mutants a later one "
             "would also have killed.", "", "| backend | runs | killed first by it (timeouts count) |",
             "|---|---|---|"]
    lines += [f"| {b} | {runs[b]} | {first[b]} |" for b in order]
    if len(order) > 1 and outcomes and all(runs[b] == len(outcomes) for b in order):
        lines += ["", "Every mutant ran on every backend:"]
        for b in order:
            only = sum(o.backends[b] != "survived" and all(o.backends[c] == "survived" for c in order if c != b)
                       for o in outcomes)
            lines.append(f"- killed only by {b}: {only}")
    elif len(order) > 1:
        lines.append("")
        lines += [f"- killed only by {b}: {first[b]} of the {runs[b]} mutants {', '.join(order[:i])} let survive"
                  for i, b in enumerate(order[1:], 1)]
        lines.append(f"- killed only by {order[0]}: not measured ({', '.join(order[1:])} did not run the "
                     f"{first[order[0]]} mutants {order[0]} killed; `--every-backend` measures it)")
    return lines + [""]


def report_markdown(outcomes: list[Outcome], total: int, sampled: bool, seed: int | None, args: str,
                    equivalent: dict[str, str], named: bool = False, backends: Sequence[str] = ()) -> str:
    """The Markdown report: figures, kills by backend, then every survivor (with its reason when known equivalent)."""
    eq = [o for o in outcomes if o.full_key in equivalent and o.status == "survived"]
    counted = [o for o in outcomes if o not in eq]
    killed = sum(o.status in ("killed", "timeout") for o in counted)
    lo, hi = clopper_pearson(killed, len(counted))
    rate = killed / len(counted) if counted else float("nan")
    lines = ["# Mutation report", "",
             f"Command: `python -m harness.testing.mutation_run {args}`", "",
             (f"**This is a random sample** of {len(outcomes)} of the {total} mutants (seed {seed}, drawn in random "
              f"order, so a run stopped early is still a random sample); the kill rate below is the sample's, with its 95% Clopper-Pearson interval for the whole set."
              if sampled else f"The {len(outcomes)} mutants named by `--mutants` ran (of {total}): a chosen set, "
              "not a random sample, so its kill rate says nothing about the whole." if named
              else f"All {total} mutants ran."), "",
             "| mutants run | equivalent | killed (timeouts count as killed) | survived | kill rate of "
             "non-equivalent | 95% interval |", "|---|---|---|---|---|---|",
             f"| {len(outcomes)} | {len(eq)} | {killed} | {len(counted) - killed} | {rate:.1%} | "
             f"{lo:.1%} - {hi:.1%} |", "", *backend_counts(outcomes, backends), "## Survivors", "",
             "| module | line | operator | change | key | equivalent because |", "|---|---|---|---|---|---|"]
    for o in sorted(outcomes, key=lambda o: (o.module, o.mutant.line, o.mutant.index)):
        if o.status == "survived":
            lines.append(f"| {o.module} | {o.mutant.line} | {o.mutant.operator} | {o.mutant.what} | "
                         f"`{_cell(o.full_key)}` | {equivalent.get(o.full_key, 'not explained: needs a check')} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell and a code span."""
    return text.replace("|", "\\|").replace("`", "'")


def load_equivalent(path: Path) -> dict[str, str]:
    """``--equivalent``'s JSON object ``{key: why}``.

    Raises:
        ValueError: the file is missing, not JSON, or not an object of strings; the message names the file.
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"--equivalent {path}: expected a JSON object {{key: why}}, could not read it: {exc}")
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"--equivalent {path}: expected a JSON object {{key: why}} of strings, "
                         f"got {type(data).__name__}")
    return data


BACKENDS = ("tf", "torch")


def parse_backends(raw: str) -> list[str]:
    """``--backends``' comma list, in run order.

    Raises:
        ValueError: an unknown or repeated backend, or none.
    """
    named = [b.strip() for b in raw.split(",") if b.strip()]
    unknown = [b for b in named if b not in BACKENDS]
    if not named or unknown or len(set(named)) != len(named):
        raise ValueError(f"--backends: expected a comma list of distinct backends from {list(BACKENDS)}, "
                         f"got {raw!r}")
    return named


def run_on_backends(module: str, path: str, index: int, pytest_args: list[str], timeouts: dict[str, float],
                    backends: list[str], every: bool) -> tuple[dict[str, str], float]:
    """Runs the mutant once per backend (``SPACEGRAPH_BACKENDS`` set to it), stopping at the first kill unless ``every``.

    ``timeouts`` gives each backend's limit in seconds.

    Returns:
        ``({backend: status}, seconds)`` with the backends run, in order.
    """
    results: dict[str, str] = {}
    seconds = 0.0
    for backend in backends:
        env = {**os.environ, "SPACEGRAPH_BACKENDS": backend}
        results[backend], took = timed(run_mutant, module, path, index, pytest_args, timeouts[backend], env=env)
        seconds += took
        if results[backend] != "survived" and not every:
            break
    return results, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.testing.mutation_run", description=__doc__)
    parser.add_argument("--package-dir", required=True, help="folder of modules to mutate, e.g. reference_agents/components")
    parser.add_argument("--root", default=".", help="import root the package folder lies under")
    parser.add_argument("--tests", default="suites/components", help="pytest path of the test selection")
    parser.add_argument("--specs", default=None, help="spec folder: run only the specs naming the mutated module")
    parser.add_argument("--sample", type=int, default=None, help="run a random sample of this many mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds per mutant and backend, raised to 3x the unmutated selection's time where "
                             "that is longer (the unmutated run itself may take 4x this)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the outcomes in OUT.json (same sample or named mutants) and run only the rest")
    parser.add_argument("--equivalent", default=None,
                        help="JSON {key: why} of equivalent mutants, keyed as the report's key column")
    parser.add_argument("--backends", default="torch,tf",
                        help="comma list, in run order (default torch,tf): each later backend runs the mutants "
                             "the earlier ones let survive; the selection must pass unmutated on each")
    parser.add_argument("--every-backend", action="store_true",
                        help="run every mutant on every backend (to count kills only one backend makes)")
    parser.add_argument("--whole-suite", action="store_true",
                        help="run all of --tests for every mutant, not only the tests selected for its module "
                             "(to confirm survivors: a parent component's spec may kill a child's mutant)")
    parser.add_argument("--mutants", nargs="+", default=None, metavar="KEY",
                        help="run exactly these mutants (e.g. the survivors of an earlier run), not a sample: "
                             "their keys (the report's key column), or MODULE:INDEX for the tree as it is now")
    parser.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    parser.add_argument("--render", action="store_true",
                        help="run nothing: rewrite OUT.md from OUT.json (e.g. with a newer --equivalent)")
    args = parser.parse_args(argv)
    try:
        backends = parse_backends(args.backends)
    except ValueError as exc:
        parser.error(str(exc))
    root = Path(args.root).resolve()
    files = sorted(p for p in (root / args.package_dir).rglob("*.py") if p.name != "__init__.py")
    sources = {p: p.read_text() for p in files}
    every = [(module_name(p, root), p, m) for p in files for m in mutants(sources[p])]
    # a random order, not sorted: every prefix of it is a random sample too, so an interrupted run still reports one
    if args.mutants:
        where = {name: k for k, (module, _, m) in enumerate(every) for name in (f"{module}:{m.index}",
                                                                                f"{module}:{m.key}")}
        unknown = [key for key in args.mutants if key not in where]
        if unknown:
            parser.error(f"--mutants: no such mutant(s) {unknown} under {args.package_dir}")
        chosen: Any = [where[key] for key in args.mutants]
    elif args.sample:
        chosen = random.Random(args.seed).sample(range(len(every)), args.sample)
    else:
        chosen = range(len(every))
    try:
        equivalent = load_equivalent(Path(args.equivalent)) if args.equivalent else {}
    except ValueError as exc:
        parser.error(str(exc))
    if args.render:
        return render(args.out, equivalent, parser)
    known = {f"{module}:{m.key}" for module, _, m in every}
    stale = sorted(k for k in equivalent if k not in known and any(k.startswith(f"{mod}:") for mod, _, _ in every))
    if stale:
        print(f"mutation_run: {len(stale)} key(s) of {args.equivalent} name no mutant of the tree (the code "
              f"changed; re-key or drop them): {stale}", file=sys.stderr)
    outcomes = resumed(args.out, len(every), args.seed, bool(args.sample) and not args.mutants, parser) \
        if args.resume else []
    done = {o.full_key for o in outcomes}
    stems: dict[str, list[str]] = {}
    limits: dict[tuple[str, str], float] = {}  # (module, backend) -> per-mutant timeout
    for k, i in enumerate(chosen):
        module, path, mutant = every[i]
        if f"{module}:{mutant.key}" in done:
            continue
        if path.read_text() != sources[path]:  # the mutant indices were taken from the old text: stop
            print(f"mutation_run: {path} changed since the run started; run on a tree nobody edits (e.g. "
                  f"`git archive HEAD | tar -x -C DIR`)", file=sys.stderr)
            return 2
        if module not in stems:
            stems[module] = [] if args.whole_suite else selection(module, Path(args.tests),
                                                                  Path(args.specs) if args.specs else None)
        select = ["-k", " or ".join(stems[module])] if stems.get(module) else []
        pytest_args = ["-x", "-q", "-p", "no:cacheprovider", args.tests, *select]
        try:
            for backend in backends:  # the selection must pass on the unchanged code, else every mutant "dies"
                if (module, backend) not in limits:
                    env = {**os.environ, "SPACEGRAPH_BACKENDS": backend}
                    status, took = baseline_run(pytest_args, 4 * args.timeout, env)
                    if status != "survived":
                        print(f"mutation_run: the selection {pytest_args} does not pass on the unmutated code "
                              f"with SPACEGRAPH_BACKENDS={backend} ({status} after {took:.0f}s); fix it before "
                              f"measuring {module}", file=sys.stderr)
                        return 2
                    limits[module, backend] = max(args.timeout, 3 * took)
            results, seconds = run_on_backends(module, str(path), mutant.index, pytest_args,
                                               {b: limits[module, b] for b in backends}, backends,
                                               args.every_backend)
        except RuntimeError as exc:  # the selection ran no test: stop (the report so far stays as written)
            print(f"mutation_run: {exc}", file=sys.stderr)
            return 2
        status = next((s for s in results.values() if s != "survived"), "survived")
        outcomes.append(Outcome(module, mutant, status, round(seconds, 1), results))
        print(f"[{k + 1}/{len(chosen)}] {module}:{mutant.line} {mutant.what}: {status} "
              f"({', '.join(f'{b} {s}' for b, s in results.items())}; {seconds:.0f}s; "
              f"ran {' or '.join(stems[module]) or 'all of ' + args.tests})", flush=True)
        sampled = bool(args.sample) and not args.mutants
        command = " ".join(sys.argv[1:] if argv is None else argv)
        Path(args.out + ".json").write_text(json.dumps({"command": command, "total": len(every), "sampled": sampled,
                                                        "seed": args.seed, "backends": backends,
                                                        "every_backend": args.every_backend,
                                                        "named": bool(args.mutants), "selections": stems,
                                                        "outcomes": outcomes_json(outcomes)},
                                                       indent=1))
        Path(args.out + ".md").write_text(report_markdown(outcomes, len(every), sampled, args.seed, command,
                                                          equivalent, named=bool(args.mutants), backends=backends))
    return 0


def baseline_run(pytest_args: list[str], timeout: float, env: dict[str, str]) -> tuple[str, float]:
    """`run_unmutated` and its seconds: a mutant's limit is scaled to the unmutated selection's time."""
    start = time.perf_counter()
    status = run_unmutated(pytest_args, timeout, env=env)
    return status, time.perf_counter() - start


def resumed(out: str, total: int, seed: int, sampled: bool, parser: argparse.ArgumentParser) -> list[Outcome]:
    """``--resume``: the outcomes of OUT.json, after checking it was the same kind of run of the same tree."""
    path = Path(out + ".json")
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
        outcomes = outcomes_from_json(data["outcomes"])
    except (ValueError, KeyError, TypeError) as exc:
        parser.error(f"--resume: expected {path} as written by a run (with 'outcomes'), could not read it: {exc!r}")
    if (data.get("total"), data.get("sampled"), data.get("seed") if sampled else seed) != (total, sampled, seed):
        parser.error(f"--resume: {path} holds a run of {data.get('total')} mutants (sampled: {data.get('sampled')}, "
                     f"seed {data.get('seed')}), this one {total} (sampled: {sampled}, seed {seed}): not the same "
                     "run; use another --out")
    return outcomes


def render(out: str, equivalent: dict[str, str], parser: argparse.ArgumentParser) -> int:
    """``--render``: OUT.md written again from OUT.json, nothing run."""
    try:
        data = json.loads(Path(out + ".json").read_text())
        outcomes = outcomes_from_json(data["outcomes"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"--render: expected {out}.json as written by a run (with 'outcomes'), could not read it: "
                     f"{exc!r}")
    Path(out + ".md").write_text(report_markdown(outcomes, data["total"], data["sampled"], data.get("seed"),
                                                 data.get("command", "(not recorded)"), equivalent,
                                                 named=data.get("named", False), backends=data.get("backends", ())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
