"""Runs the asv benchmarks offline with this interpreter (the tox ``bench`` env), over one or more commits.

asv's ``existing`` environment benchmarks the interpreter it is given and cannot
install another commit of the project. This runner does that part itself: each
commit of a range is checked out into a temporary ``git worktree``, asv runs that
worktree's benchmarks (``benchmark_dir``) against that worktree's packages
(``ASV_PYTHONPATH``, which asv turns into the benchmark processes' ``PYTHONPATH``
ahead of any installed copy), the results are filed under the commit
(``--set-commit-hash``), and the worktree is removed afterwards. Commits that have
no benchmarks yet are skipped with a message. Without a range, the checkout as it
is (uncommitted edits included) is benchmarked and filed under ``HEAD``.

No network is needed: asv only reads the local repository.

Usage (``python3 -m tox -e bench -- ARGS`` passes ARGS here)::

    python asv_bench/run_offline.py                  # the checkout, filed under HEAD; then asv publish
    python asv_bench/run_offline.py --quick          # one pass per benchmark; results thrown away
    python asv_bench/run_offline.py --range HEAD~10..HEAD --steps 4 --bench build
    python asv_bench/run_offline.py --commits cd90c0c b102cf2 -a rounds=1
    python asv_bench/run_offline.py --no-run --preview   # publish, serve on http://127.0.0.1:8080/
    python asv_bench/run_offline.py --check          # asv check only
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import http.server
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Iterator, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(HERE, "asv.conf.json")
DEFAULT_RESULTS = os.path.join(HERE, "results")
DEFAULT_HTML = os.path.join(HERE, "html")
DEFAULT_MACHINE = "spacegraph-dev-2core"
BENCH_SUBDIR = os.path.join("asv_bench", "benchmarks")
# Machine facts that must not change under one machine name (RAM is left out: it drifts by a few MB).
STABLE_FACTS = ("arch", "cpu", "num_cpu")


# The tox env's settings (tox.ini [testenv] set_env), so a run outside tox measures the same way.
QUIET_SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1",
                       "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONHASHSEED": "0"}


class RunnerError(RuntimeError):
    """A problem with the runner's input or environment, with a message saying what to do."""


@dataclasses.dataclass(frozen=True)
class Commit:
    """One commit to benchmark.

    Attributes:
        sha: the full hash.
        date: committer date, ISO 8601.
        subject: first line of the message.
    """

    sha: str
    date: str
    subject: str

    @property
    def short(self) -> str:
        """The first 8 characters of the hash."""
        return self.sha[:8]

    def describe(self) -> str:
        """``<short> <date> <subject>`` (subject cut to 60 characters)."""
        subject = self.subject if len(self.subject) <= 60 else self.subject[:57] + "..."
        return f"{self.short} {self.date} {subject}"


def git(args: Sequence[str], cwd: str = REPO_ROOT) -> str:
    """Runs git and returns its stripped stdout.

    Raises:
        RunnerError: naming the git command and git's own message when it fails.
    """
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RunnerError(f"`git {' '.join(args)}` in {cwd} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def commit_info(rev: str, repo: str = REPO_ROOT) -> Commit:
    """The commit a revision names.

    Raises:
        RunnerError: when ``rev`` names no commit of ``repo``.
    """
    try:
        out = git(["log", "-1", "--format=%H%x00%cI%x00%s", f"{rev}^{{commit}}", "--"], cwd=repo)
    except RunnerError:
        raise RunnerError(f"revision {rev!r}: not a commit of the repository at {repo}") from None
    sha, date, subject = out.split("\x00", 2)
    return Commit(sha, date, subject)


def pick_evenly(items: Sequence, n: int) -> list:
    """``n`` items spread evenly over ``items``, always keeping the first and the last.

    Raises:
        ValueError: if ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"steps must be >= 1; got {n}")
    if n >= len(items):
        return list(items)
    if n == 1:
        return [items[-1]]
    idx = sorted({round(i * (len(items) - 1) / (n - 1)) for i in range(n)})
    return [items[i] for i in idx]


def resolve_commits(range_spec: str | None = None, commits: Sequence[str] | None = None, steps: int | None = None,
                    repo: str = REPO_ROOT) -> list[Commit]:
    """The commits to benchmark, oldest first.

    Args:
        range_spec: a git range (``A..B``: the commits after A up to and including B,
            along first parents), or a single revision (that commit alone).
        commits: revisions named one by one (run in commit-date order).
        steps: keep only this many, spread evenly (the newest always kept).
        repo: the repository.

    Raises:
        RunnerError: a revision that names no commit, or a range with no commits.
    """
    if range_spec and ".." in range_spec:
        if "..." in range_spec:
            raise RunnerError(f"--range {range_spec!r}: use A..B (two dots); symmetric differences are not supported")
        start, _, end = range_spec.partition("..")
        for rev in (start, end):
            if rev:
                commit_info(rev, repo)  # a clear error for a bad end before git's own message
        shas = git(["rev-list", "--first-parent", "--reverse", range_spec, "--"], cwd=repo).split()
        if not shas:
            raise RunnerError(f"--range {range_spec!r}: the range holds no commits")
        selected = [commit_info(sha, repo) for sha in shas]
    else:
        revs = ([range_spec] if range_spec else []) + list(commits or [])
        selected = sorted({c.sha: c for c in (commit_info(r, repo) for r in revs)}.values(), key=lambda c: c.date)
    return pick_evenly(selected, steps) if steps else selected


def skip_reason(root: str) -> str | None:
    """Why the tree at ``root`` cannot be benchmarked (no benchmark modules), or None if it can."""
    bench_dir = os.path.join(root, BENCH_SUBDIR)
    if not os.path.isdir(bench_dir):
        return f"no {BENCH_SUBDIR}/ (the benchmarks did not exist yet)"
    if not any(f.endswith(".py") and f != "__init__.py" for f in os.listdir(bench_dir)):
        return f"{BENCH_SUBDIR}/ holds no benchmark modules"
    return None


def write_config(path: str, *, benchmark_dir: str, results_dir: str, html_dir: str, repo: str = REPO_ROOT,
                 base: str = CONFIG) -> str:
    """Writes a copy of the asv config with absolute paths for one run and returns its path.

    Raises:
        RunnerError: if the base config cannot be read.
    """
    try:
        with open(base, encoding="utf-8") as f:
            conf = json.load(f)
    except (OSError, ValueError) as exc:
        raise RunnerError(f"cannot read the asv config {base}: {exc}") from None
    conf.update(repo=repo, benchmark_dir=benchmark_dir, results_dir=results_dir, html_dir=html_dir)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=4)
    return path


@contextlib.contextmanager
def worktree(sha: str, repo: str = REPO_ROOT) -> Iterator[str]:
    """A temporary detached ``git worktree`` of ``sha``, removed (and pruned) on exit."""
    parent = tempfile.mkdtemp(prefix="spacegraph-asv-")
    path = os.path.join(parent, sha[:12])
    git(["worktree", "add", "--detach", "--quiet", path, sha], cwd=repo)
    try:
        yield path
    finally:
        try:
            git(["worktree", "remove", "--force", path], cwd=repo)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
            git(["worktree", "prune"], cwd=repo)


def bench_env(root: str, base: dict | None = None, quick: bool = False) -> dict:
    """The environment for asv: benchmarks import the packages of the tree at ``root``.

    With ``quick``, ``SPACEGRAPH_BENCH_QUICK=1`` tells the benchmarks to shrink what
    asv's ``--quick`` cannot: asv runs a timing once, but not what a ``track_`` benchmark
    does (DQN training steps, timing windows), nor the number of parameter combinations,
    each of which costs a process of its own (`benchmarks.common.quick` and ``grid``).

    asv drops ``PYTHONPATH`` and sets the benchmark processes' ``PYTHONPATH`` from
    ``ASV_PYTHONPATH``; ``SPACEGRAPH_BENCH_ROOT`` lets the benchmark package check it.
    Thread counts and TF logging default to the tox env's settings.
    """
    env = dict(os.environ if base is None else base)
    for key, value in QUIET_SINGLE_THREAD.items():
        env.setdefault(key, value)
    env["ASV_PYTHONPATH"] = root
    env["SPACEGRAPH_BENCH_ROOT"] = root
    env.pop("PYTHONPATH", None)
    if quick:
        env["SPACEGRAPH_BENCH_QUICK"] = "1"
    return env


def imported_from(root: str, python: str = sys.executable) -> str:
    """Where the interpreter imports ``harness`` from, with ``root`` on ``PYTHONPATH`` (as asv sets it).

    Raises:
        RunnerError: if ``harness`` cannot be imported or comes from outside ``root``
            (a stale installed copy would be benchmarked instead of the tree).
    """
    env = bench_env(root)
    env["PYTHONPATH"] = env.pop("ASV_PYTHONPATH")
    try:
        proc = subprocess.run([python, "-c", "import harness; print(harness.__file__)"], env=env,
                              cwd=tempfile.gettempdir(), capture_output=True, text=True)
    except OSError as exc:
        raise RunnerError(f"cannot run {python}: {exc}") from None
    if proc.returncode != 0:
        raise RunnerError(f"{python} cannot import harness from {root}: {proc.stderr.strip()[-500:]}")
    path = proc.stdout.strip()
    if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
        raise RunnerError(f"harness is imported from {path}, not from the tree under test {root}")
    return path


def machine_facts() -> dict[str, str]:
    """This machine's facts as asv records them (arch, cpu, num_cpu, os, ram)."""
    from asv.machine import Machine

    return {k: str(v) for k, v in Machine.get_defaults().items()}


def check_machine(results_dir: str, machine: str, facts: dict[str, str]) -> None:
    """Refuses to file results of different hardware under an existing machine name.

    Raises:
        RunnerError: naming the machine file and the facts that differ.
    """
    path = os.path.join(results_dir, machine, "machine.json")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        recorded = json.load(f)
    diff = {k: (recorded.get(k), facts.get(k)) for k in STABLE_FACTS if str(recorded.get(k)) != str(facts.get(k))}
    if diff:
        shown = ", ".join(f"{k}: recorded {a!r}, this machine {b!r}" for k, (a, b) in diff.items())
        raise RunnerError(f"{path} describes other hardware ({shown}); pass --machine NAME with a name of "
                          f"this machine's own")


class Runner:
    """Runs asv commands with this interpreter.

    Args:
        results_dir: where asv writes results (and ``benchmarks.json``).
        html_dir: where ``asv publish`` writes the dashboard.
        machine: asv machine name the results are filed under.
        python: the interpreter (the one asv's ``existing`` environment benchmarks).
        quick: smoke runs (see `bench_env`).
    """

    def __init__(self, results_dir: str, html_dir: str, machine: str, python: str = sys.executable,
                 quick: bool = False) -> None:
        self.quick = quick
        self.results_dir = os.path.abspath(results_dir)
        self.html_dir = os.path.abspath(html_dir)
        self.machine = machine
        self.python = python
        self.tmp = tempfile.mkdtemp(prefix="spacegraph-asv-conf-")

    def close(self) -> None:
        """Removes the temporary configs."""
        shutil.rmtree(self.tmp, ignore_errors=True)

    def asv(self, args: Sequence[str], root: str = REPO_ROOT, check: bool = True) -> int:
        """Runs ``asv ARGS`` against the tree at ``root`` and returns its exit status.

        Raises:
            RunnerError: if ``check`` and asv exits non-zero.
        """
        conf = write_config(os.path.join(self.tmp, f"asv.{os.path.basename(root)}.conf.json"),
                            benchmark_dir=os.path.join(root, BENCH_SUBDIR), results_dir=self.results_dir,
                            html_dir=self.html_dir)
        cmd = [self.python, "-m", "asv", "--config", conf, *args]
        print("+", " ".join(cmd[2:]), f"  [tree: {root}]", flush=True)
        rc = subprocess.run(cmd, cwd=HERE, env=bench_env(root, quick=self.quick)).returncode
        if check and rc != 0:
            raise RunnerError(f"`asv {' '.join(args)}` exited with {rc} (tree {root})")
        return rc

    def register_machine(self) -> None:
        """Records this machine under ``self.machine`` (refusing other hardware under a used name)."""
        facts = machine_facts()
        check_machine(self.results_dir, self.machine, facts)
        print(f"[bench] machine {self.machine}: " + ", ".join(f"{k}={v}" for k, v in facts.items() if k != "machine"),
              flush=True)
        self.asv(["machine", "--machine", self.machine, "--yes"])

    def run_tree(self, root: str, sha: str, quick: bool, bench: Sequence[str], attributes: Sequence[str] = ()) -> int:
        """Runs the benchmarks of the tree at ``root`` and files the results under ``sha``.

        Args:
            root: the tree (the checkout or a worktree).
            sha: the commit the results are filed under.
            quick: asv ``--quick``.
            bench: asv ``--bench`` regexes.
            attributes: asv ``-a key=value`` benchmark attribute overrides (e.g. ``rounds=1``).
        """
        print(f"[bench] harness imported from {imported_from(root, self.python)}", flush=True)
        args = ["run", "--python=same", f"--set-commit-hash={sha}", f"--machine={self.machine}", "--show-stderr",
                "--durations=all"]
        if quick:
            args.append("--quick")
        for regex in bench:
            args += ["--bench", regex]
        for attribute in attributes:
            args += ["-a", attribute]
        return self.asv(args, root=root, check=False)

    def rediscover(self) -> None:
        """Rewrites ``benchmarks.json`` from the checkout (a run of an older commit leaves its own set)."""
        head = git(["rev-parse", "HEAD"])
        self.asv(["run", "--python=same", f"--set-commit-hash={head}", f"--machine={self.machine}",
                  "--bench", "just-discover"])


def make_server(html_dir: str, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server for ``html_dir`` bound to 127.0.0.1 only (``asv preview`` binds every interface).

    Raises:
        RunnerError: if there is no published dashboard in ``html_dir`` or the port is taken.
    """
    if not os.path.exists(os.path.join(html_dir, "index.html")):
        raise RunnerError(f"no dashboard in {html_dir}: run without --no-run/--no-publish first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=html_dir)
    try:
        return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise RunnerError(f"cannot serve on 127.0.0.1:{port}: {exc}; pick another --port") from None


def serve(html_dir: str, port: int, seconds: float | None = None) -> None:
    """Serves the dashboard on ``http://127.0.0.1:PORT/`` until Ctrl-C or for ``seconds``."""
    with make_server(html_dir, port) as httpd:
        print(f"[bench] dashboard at http://127.0.0.1:{httpd.server_address[1]}/ (Ctrl-C stops)", flush=True)
        timer = threading.Timer(seconds, httpd.shutdown) if seconds is not None else None
        if timer is not None:
            timer.start()
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            if timer is not None:
                timer.cancel()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="one pass per benchmark (a smoke test); its results go to a temporary dir and are "
                             "thrown away unless --results-dir is given")
    parser.add_argument("--bench", action="append", default=[], metavar="REGEX",
                        help="only benchmarks matching this regex (repeatable)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--range", dest="range_spec", metavar="A..B",
                       help="benchmark each commit of this git range (first parents), each in a temporary worktree")
    which.add_argument("--commits", nargs="+", metavar="REV", help="benchmark these commits, each in a worktree")
    which.add_argument("--no-run", action="store_true", help="run no benchmarks (publish/preview only)")
    parser.add_argument("--steps", type=int, help="with --range/--commits: only this many commits, spread evenly")
    parser.add_argument("-a", "--attribute", action="append", default=[], metavar="KEY=VALUE",
                        help="override a benchmark attribute, as asv run -a (e.g. rounds=1 to halve time_ runs)")
    parser.add_argument("--machine", default=os.environ.get("SPACEGRAPH_ASV_MACHINE", DEFAULT_MACHINE),
                        help=f"asv machine name (default {DEFAULT_MACHINE}, or $SPACEGRAPH_ASV_MACHINE); "
                             "give your own on other hardware")
    parser.add_argument("--results-dir", help="asv results dir (default asv_bench/results)")
    parser.add_argument("--html-dir", default=DEFAULT_HTML, help="dashboard dir (default asv_bench/html)")
    parser.add_argument("--check", action="store_true", help="only run `asv check` on the checkout's benchmarks")
    parser.add_argument("--no-publish", action="store_true", help="do not write the dashboard (asv publish)")
    parser.add_argument("--preview", action="store_true", help="serve the dashboard on 127.0.0.1 until Ctrl-C")
    parser.add_argument("--port", type=int, default=8080, help="port for --preview (default 8080)")
    parser.add_argument("--preview-seconds", type=float, help="stop serving after this many seconds")
    args = parser.parse_args(argv)
    if args.steps is not None and not (args.range_spec or args.commits):
        parser.error("--steps needs --range or --commits")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be >= 1; got {args.steps}")
    if args.quick and args.no_run:
        parser.error("--quick and --no-run contradict each other")
    if args.quick and args.preview and not args.results_dir:
        parser.error("--quick results are thrown away: --preview with --quick needs --results-dir")
    if args.no_publish and args.preview:
        parser.error("--preview shows the published dashboard: drop --no-publish")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535; got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status (1 if any benchmark or commit failed)."""
    args = parse_args(argv)
    temp_results = None
    if args.results_dir:
        results_dir = args.results_dir
    elif args.quick:
        temp_results = results_dir = tempfile.mkdtemp(prefix="spacegraph-asv-quick-")
    else:
        results_dir = DEFAULT_RESULTS
    publish = not args.no_publish and not temp_results
    runner = Runner(results_dir, args.html_dir, args.machine, quick=args.quick)
    failed: list[str] = []
    try:
        if args.check:
            runner.asv(["check", "--python=same"])
            return 0
        if not args.no_run:
            print(f"[bench] {platform.python_implementation()} {platform.python_version()} ({sys.executable}); "
                  f"results in {runner.results_dir}", flush=True)
            runner.register_machine()
            if args.range_spec or args.commits:
                failed += run_commits(runner, resolve_commits(args.range_spec, args.commits, args.steps),
                                      args.quick, args.bench, args.attribute)
            else:
                runner.asv(["check", "--python=same"])
                head = commit_info("HEAD")
                if runner.run_tree(REPO_ROOT, head.sha, args.quick, args.bench, args.attribute) != 0:
                    failed.append(f"the checkout at {head.describe()}")
        if publish:
            runner.asv(["publish"])
            print(f"[bench] dashboard written to {runner.html_dir}", flush=True)
        if args.preview:
            serve(runner.html_dir, args.port, args.preview_seconds)
    except RunnerError as exc:
        print(f"[bench] error: {exc}", file=sys.stderr)
        return 1
    finally:
        runner.close()
        if temp_results:
            shutil.rmtree(temp_results, ignore_errors=True)
    if failed:
        print("[bench] benchmarks failed for:", *(f"  {f}" for f in failed), sep="\n", file=sys.stderr)
        return 1
    return 0


def run_commits(runner: Runner, commits: Sequence[Commit], quick: bool, bench: Sequence[str],
                attributes: Sequence[str] = ()) -> list[str]:
    """Benchmarks each commit in its own temporary worktree; returns the commits whose run failed."""
    print(f"[bench] {len(commits)} commit(s):", *(f"  {c.describe()}" for c in commits), sep="\n", flush=True)
    failed, ran = [], 0
    for commit in commits:
        with worktree(commit.sha) as tree:
            reason = skip_reason(tree)
            if reason:
                print(f"[bench] skip {commit.describe()}: {reason}", flush=True)
                continue
            print(f"[bench] commit {commit.describe()}", flush=True)
            ran += 1
            if runner.run_tree(tree, commit.sha, quick, bench, attributes) != 0:
                failed.append(commit.describe())
    if ran:
        runner.rediscover()
    return failed


if __name__ == "__main__":
    sys.exit(main())
