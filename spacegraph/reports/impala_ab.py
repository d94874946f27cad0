"""Interleaved A/B of IMPALA's distributed-TF throughput on Pong: variants measured in turn, round after round.

Each round runs every variant once (A, B, ... then A, B, ... again), each as the ``ours`` side of
`spacegraph.reports.impala_throughput` in a fresh child process (learning on, ``--seconds`` of measurement
after every actor delivered). A shared machine's load drifts between rounds, not within one, so the
figure to trust is each variant's frames/s over the first variant's in the same round (paired), as a
median over the rounds::

    python -m spacegraph.reports.impala_ab --variants VARIANTS.json --rounds 3 --seconds 20 --actors 2

``VARIANTS.json`` maps names to variants (the first is the baseline): ``{"backend": "tf"}`` (the learner's
backend), ``"actor_backend"``, ``"config"`` (config sections merged into ``impala_pong``, e.g.
``{"env": {"num_envs": 8}, "rollout": {"batch_size": 2}}``), ``"actors"`` and ``"env"`` (environment
variables of the child and its actors, e.g. ``{"TF_ENABLE_ONEDNN_OPTS": "0"}``). Without ``--variants``
the file's `DEFAULT_VARIANTS` run: the previous Pong settings against today's config.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from spacegraph.reports.impala_throughput import run_side

#: The variants run without ``--variants``: Pong's settings before issue 41 (PyTorch learner and actors, 4 envs
#: per actor on the python env path, batches of 4 rollouts) against the config as it is.
DEFAULT_VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"backend": "torch", "actor_backend": "torch",
               "config": {"env": {"num_envs": 4, "vectorizer": "python"}, "rollout": {"batch_size": 4}}},
    "config": {},
}


def load_variants(path: str) -> dict[str, dict[str, Any]]:
    """The variants in a JSON file (an object of objects), checked.

    Raises:
        ValueError: naming the file and what is wrong (unreadable, not JSON, not an object of objects, an
            unknown key).
    """
    known = {"backend", "actor_backend", "config", "actors", "env"}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"--variants {path}: cannot be read as JSON: {exc}") from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"--variants {path}: expected a JSON object of named variants (objects); got "
                         f"{type(data).__name__}")
    for name, variant in data.items():
        unknown = sorted(set(variant) - known)
        if unknown:
            raise ValueError(f"--variants {path}: variant {name!r}: unknown keys {unknown}; expected among "
                             f"{sorted(known)}")
    return data


def interleave(variants: dict[str, dict[str, Any]], rounds: int, seconds: float, actors: int,
               log: Any = print) -> dict[str, Any]:
    """Every variant once per round, in order, for ``rounds`` rounds; the rows and each variant's summary.

    Returns:
        ``{"rows": [{"round", "variant", "frames_per_s", ...}], "summary": {name: {"median_frames_per_s",
        "paired_ratio_median", "paired_ratios"}}}`` (ratios against the first variant of the same round).
    """
    rows: list[dict[str, Any]] = []
    for r in range(rounds):
        for name, variant in variants.items():
            side = {k: v for k, v in variant.items() if k != "actors"}
            out = run_side("ours", "pong", int(variant.get("actors", actors)), seconds, 600, side)
            rows.append({"round": r, "variant": name, **out})
            log(f"round {r} {name}: {out.get('frames_per_s', out.get('error'))}")
    base = next(iter(variants))
    summary = {}
    for name in variants:
        mine = {row["round"]: row.get("frames_per_s") for row in rows if row["variant"] == name}
        ref = {row["round"]: row.get("frames_per_s") for row in rows if row["variant"] == base}
        ratios = [mine[r] / ref[r] for r in mine if mine[r] and ref.get(r)]
        fps = [f for f in mine.values() if f]
        summary[name] = {"median_frames_per_s": statistics.median(fps) if fps else None,
                         "paired_ratio_median": statistics.median(ratios) if ratios else None,
                         "paired_ratios": ratios}
    return {"rows": rows, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); prints a line per measurement, then the summary as JSON."""
    parser = argparse.ArgumentParser(prog="python -m spacegraph.reports.impala_ab",
                                     description="interleaved A/B of IMPALA's distributed-TF Pong throughput")
    parser.add_argument("--variants", help="JSON file of named variants (default: before/config)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every variant once (default 3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run (default 20)")
    parser.add_argument("--actors", type=int, default=2, help="actor processes unless a variant says (default 2)")
    parser.add_argument("--out", help="also write the rows and summary to this JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or args.actors < 1:
        parser.error(f"--rounds and --actors must be >= 1 and --seconds > 0; got {args.rounds}, {args.actors}, "
                     f"{args.seconds}")
    try:
        variants = load_variants(args.variants) if args.variants else DEFAULT_VARIANTS
    except ValueError as exc:
        print(f"impala_ab: {exc}", file=sys.stderr)
        return 2
    result = interleave(variants, args.rounds, args.seconds, args.actors)
    text = json.dumps(result["summary"], indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
