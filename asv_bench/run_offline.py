"""Runs the asv benchmarks offline against the current interpreter (the tox `bench` env).

Usage: python asv_bench/run_offline.py [--quick] [--bench REGEX] [--publish]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd: list[str]) -> None:
    """Runs an asv command in this folder, failing loudly."""
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=HERE, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one pass per benchmark (a smoke test)")
    parser.add_argument("--bench", help="only benchmarks matching this regex")
    parser.add_argument("--publish", action="store_true", help="write the HTML dashboard to asv_bench/html")
    args = parser.parse_args()
    asv = [sys.executable, "-m", "asv"]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, check=True, capture_output=True,
                            text=True).stdout.strip()
    run(asv + ["machine", "--yes"])
    cmd = asv + ["run", "--python=same", f"--set-commit-hash={commit}", "--show-stderr"]
    if args.quick:
        cmd.append("--quick")
    if args.bench:
        cmd += ["--bench", args.bench]
    run(cmd)
    if args.publish:
        run(asv + ["publish"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
