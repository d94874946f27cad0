"""``python -m harness.testing.mutation_run``: mutation testing of a package folder against a test selection.

For each module under ``--package-dir`` (package ``__init__`` files aside) it lists the
mutants (`harness.testing.mutation.mutants`), optionally draws a random sample of them
(``--sample N --seed S``), and runs per mutant only the spec tests of the specs naming a
class of that module (``--specs``: the ``-k`` expression of their stems; all of
``--tests`` when none does), with ``-x`` and a per-mutant ``--timeout``, one at a time.
It writes ``OUT.json`` (every outcome) and ``OUT.md`` (kill rate with its 95% Clopper-
Pearson interval, survivors by module and line), and says plainly when it ran a sample.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import random
import sys
from pathlib import Path

import yaml

from harness.testing.mutation import Outcome, mutants, outcomes_json, run_mutant, timed


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
    """Stems of the spec files naming a class defined in ``module`` (directly or through ``spec_covers``)."""
    from harness.specs.loader import import_object

    stems = []
    for path in sorted(spec_dir.glob("*.yaml")):
        target = (yaml.safe_load(path.read_text()) or {}).get("component")
        try:
            cls = import_object(target)
        except Exception:
            continue
        classes = [cls, *getattr(cls, "spec_covers", ())] if inspect.isclass(cls) else []
        if any(c.__module__ == module for c in classes):
            stems.append(path.stem)
    return stems


def report_markdown(outcomes: list[Outcome], total: int, sampled: bool, seed: int | None, args: str,
                    equivalent: dict[str, str]) -> str:
    """The Markdown report: figures, then every survivor (with its explanation when known equivalent)."""
    keyed = {f"{o.module}:{o.mutant.index}": o for o in outcomes}
    eq = [k for k in keyed if k in equivalent and keyed[k].status == "survived"]
    counted = [o for k, o in keyed.items() if k not in eq]
    killed = sum(o.status in ("killed", "timeout") for o in counted)
    lo, hi = clopper_pearson(killed, len(counted))
    rate = killed / len(counted) if counted else float("nan")
    lines = ["# Mutation report", "",
             f"Command: `python -m harness.testing.mutation_run {args}`", "",
             (f"**This is a random sample** of {len(outcomes)} of the {total} mutants (seed {seed}, drawn in random "
              f"order, so a run stopped early is still a random sample); the kill rate below is the sample's, with its 95% Clopper-Pearson interval for the whole set."
              if sampled else f"All {total} mutants ran."), "",
             "| mutants run | equivalent | killed (timeouts count as killed) | survived | kill rate of "
             "non-equivalent | 95% interval |", "|---|---|---|---|---|---|",
             f"| {len(outcomes)} | {len(eq)} | {killed} | {len(counted) - killed} | {rate:.1%} | "
             f"{lo:.1%} - {hi:.1%} |", "", "## Survivors", "",
             "| module | line | operator | change | equivalent because |", "|---|---|---|---|---|"]
    for key, o in sorted(keyed.items(), key=lambda kv: (kv[1].module, kv[1].mutant.line)):
        if o.status == "survived":
            lines.append(f"| {o.module} | {o.mutant.line} | {o.mutant.operator} | {o.mutant.what} | "
                         f"{equivalent.get(key, 'not explained: needs a check')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.testing.mutation_run", description=__doc__)
    parser.add_argument("--package-dir", required=True, help="folder of modules to mutate, e.g. reference_agents/components")
    parser.add_argument("--root", default=".", help="import root the package folder lies under")
    parser.add_argument("--tests", default="suites/components", help="pytest path of the test selection")
    parser.add_argument("--specs", default=None, help="spec folder: run only the specs naming the mutated module")
    parser.add_argument("--sample", type=int, default=None, help="run a random sample of this many mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--equivalent", default=None, help="JSON {module:index: why} of equivalent mutants")
    parser.add_argument("--out", required=True, help="writes OUT.json and OUT.md")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    files = sorted(p for p in (root / args.package_dir).rglob("*.py") if p.name != "__init__.py")
    every = [(module_name(p, root), p, m) for p in files for m in mutants(p.read_text())]
    # a random order, not sorted: every prefix of it is a random sample too, so an interrupted run still reports one
    chosen = random.Random(args.seed).sample(range(len(every)), args.sample) if args.sample else range(len(every))
    equivalent = json.loads(Path(args.equivalent).read_text()) if args.equivalent else {}
    outcomes: list[Outcome] = []
    stems: dict[str, list[str]] = {}
    for k, i in enumerate(chosen):
        module, path, mutant = every[i]
        if args.specs and module not in stems:
            stems[module] = spec_stems(module, Path(args.specs))
        select = ["-k", " or ".join(stems[module])] if stems.get(module) else []
        try:
            status, seconds = timed(run_mutant, module, str(path), mutant.index,
                                    ["-x", "-q", "-p", "no:cacheprovider", args.tests, *select], args.timeout)
        except RuntimeError as exc:  # the selection ran no test: stop (the report so far stays as written)
            print(f"mutation_run: {exc}", file=sys.stderr)
            return 2
        outcomes.append(Outcome(module, mutant, status, round(seconds, 1)))
        print(f"[{k + 1}/{len(chosen)}] {module}:{mutant.line} {mutant.what}: {status} ({seconds:.0f}s)", flush=True)
        Path(args.out + ".json").write_text(json.dumps({"total": len(every), "sampled": bool(args.sample),
                                                        "seed": args.seed, "outcomes": outcomes_json(outcomes)},
                                                       indent=1))
        Path(args.out + ".md").write_text(report_markdown(outcomes, len(every), bool(args.sample), args.seed,
                                                          " ".join(sys.argv[1:] if argv is None else argv),
                                                          equivalent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
