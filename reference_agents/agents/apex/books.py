"""`ApexDriver`'s account of its actors (`ShardBooks`, a mixin of the driver; `ShardBook`, one per shard): the
transition ledger (produced = held + evicted + lost + in flight), and how the driver survives its actors: a failed
worker is restarted with the current weights, a dead replay shard is restarted (from its last snapshot when there
is one) and what died with it is booked as lost, so the ledger still adds up."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from harness.execution.actors import ActorFailure, Future

SHARD_FILE = "shard-{}.npz"


@dataclasses.dataclass
class ShardBook:
    """The driver's account of one shard: what it sent, what the shard confirmed, what died with it."""

    sent: int = 0
    in_flight: int = 0
    last: dict[str, Any] = dataclasses.field(default_factory=dict)   # the shard's last `stats`
    restored: int = 0            # transitions the current incarnation started with (from a snapshot)
    evicted_base: int = 0        # the current incarnation's `evicted` count when it started (a snapshot's)
    sampled_base: int = 0
    lost: int = 0                # held at a death plus adds in flight then, less what came back
    evicted_before: int = 0      # evicted by earlier incarnations
    sampled_before: int = 0
    deaths: int = 0


class ShardBooks:
    """The ledger, restarts and snapshots of `ApexDriver` (which holds the actors, books, locks and counters used
    here)."""

    # ---- faults ------------------------------------------------------------------------------------------------
    def _on_shard_failure(self, j: int, incarnation: int, failure: ActorFailure) -> None:
        # The learner's threads and the driver may all see one death; a report that arrives while the death is
        # being handled (the restart has not yet moved the incarnation on) must not restart the new one again.
        with self._dead_lock:
            if self.shards[j].incarnation == incarnation and (j, incarnation) not in self._reported_deaths:
                self._reported_deaths.add((j, incarnation))
                self._dead_shards[j] = (incarnation, str(failure))

    def _restart_worker(self, i: int, failure: ActorFailure) -> None:
        handle = self.workers[i]
        self.worker_failures.append({"name": handle.name, "at_step": self.total_steps, "died": failure.died,
                                     "error": failure.detail.splitlines()[0] if failure.detail else ""})
        self.stream.write(f"Ape-X: worker {handle.name!r} failed at env step {self.total_steps:,} "
                          f"({'died' if failure.died else 'raised'}); restarting it\n")
        self.stream.flush()
        if i in self._worker_instances:
            self._retired.add(self._worker_instances[i])   # its answers still on their way are not a new restart
        self.executor.restart(handle)
        self._worker_instances[i] = handle.call("set_incarnation", handle.incarnation).result(timeout=self.timeout)
        for f in self._send_weights([i]):
            f.result(timeout=self.timeout)

    def _handle_dead_shards(self, adds: dict[Future, tuple]) -> None:
        with self._dead_lock:
            dead, self._dead_shards = self._dead_shards, {}
        for j, (incarnation, reason) in dead.items():
            handle, book = self.shards[j], self.books[j]
            in_flight = sum(n for f, (k, n, inc, _) in adds.items() if k == j and inc == incarnation)
            for f in [f for f, (k, _, inc, _) in adds.items() if k == j and inc == incarnation]:
                del adds[f]    # written off: whatever they answer, the shard's contents are gone
            held = int(book.last.get("size", 0))
            book.evicted_before += int(book.last.get("evicted", 0)) - book.evicted_base
            book.sampled_before += int(book.last.get("sampled", 0)) - book.sampled_base
            book.in_flight -= in_flight
            book.deaths += 1
            self.executor.restart(handle)
            restored = 0
            path = self._snapshot_path(j)
            if path is not None and self._has_snapshot[j]:
                stats = handle.call("load", path).result(timeout=self.timeout)
                restored = int(stats["size"])
                book.last = stats
            else:
                book.last = {}
            book.restored = restored
            book.evicted_base, book.sampled_base = int(book.last.get("evicted", 0)), int(book.last.get("sampled", 0))
            book.lost += held + in_flight - restored
            self.shard_failures.append({"name": handle.name, "at_step": self.total_steps, "lost": held + in_flight
                                        - restored, "restored": restored, "reason": reason.splitlines()[0]})
            self.stream.write(f"Ape-X: replay shard {handle.name!r} died at env step {self.total_steps:,} "
                              f"({reason.splitlines()[0][:160]}); it held {held:,} transitions, {in_flight:,} more "
                              f"were on their way; restarted {'from its snapshot with ' + format(restored, ',') if restored else 'empty'}\n")
            self.stream.flush()
            assert self.learner is not None
            self.learner.mark_live(j)

    # ---- snapshots ------------------------------------------------------------------------------------------------
    def _snapshot_path(self, j: int) -> str | None:
        return None if self.snapshot_dir is None else os.path.join(self.snapshot_dir, SHARD_FILE.format(j))

    def save_shards(self, directory: str) -> list[dict[str, Any]]:
        """Every shard writes its snapshot into ``directory`` (``shard-J.npz``); returns their stats."""
        futures = [s.call("save", os.path.join(directory, SHARD_FILE.format(j))) for j, s in enumerate(self.shards)]
        return [f.result(timeout=self.timeout) for f in futures]

    def load_shards(self, directory: str) -> list[dict[str, Any]]:
        """Every shard loads its snapshot from ``directory`` (a resume; after `start`); returns their stats.

        Raises:
            ValueError: naming the shard file that is missing or unreadable.
        """
        self.start()
        out = []
        for j, handle in enumerate(self.shards):
            path = os.path.join(directory, SHARD_FILE.format(j))
            if not os.path.exists(path):
                raise ValueError(f"ApexDriver.load_shards: {path} is missing (the run had {self.num_shards} shards)")
            try:
                stats = handle.call("load", path).result(timeout=self.timeout)
            except ActorFailure as failure:
                raise ValueError(f"ApexDriver.load_shards: {failure}") from None
            self.books[j].last = stats
            out.append(stats)
        return out

    def _snapshot(self) -> None:
        assert self.snapshot_dir is not None
        for j, stats in enumerate(self.save_shards(self.snapshot_dir)):
            self._has_snapshot[j] = True

    # ---- the ledger ---------------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Asks every shard for its current `ReplayShard.stats` (a dead one is handled as in a run)."""
        for j, handle in enumerate(self.shards):
            incarnation = handle.incarnation
            try:
                self.books[j].last = handle.call("stats").result(timeout=self.timeout)
            except ActorFailure as failure:
                self._on_shard_failure(j, incarnation, failure)
                self._handle_dead_shards({})

    def ledger(self, refresh: bool = True) -> dict[str, Any]:
        """Transitions in and out: ``produced`` (by workers, sent to shards) ``= held + evicted + lost +
        in_flight``; ``sampled`` by the learner from the shards, ``learned`` by it; per shard the same.

        ``lost`` counts, at each shard death, what the shard held plus the adds on their way to it, less what
        came back from its snapshot (transitions evicted after the snapshot that came back with it are
        netted against those added after it and lost).
        With ``refresh`` the shards are asked for their counts first (else their last answers are used)."""
        if refresh and self._started:
            self.refresh()
        shards = []
        for j, book in enumerate(self.books):
            last = book.last
            shards.append({"name": f"shard-{j}", "sent": book.sent, "held": int(last.get("size", 0)),
                           "evicted": book.evicted_before + int(last.get("evicted", 0)) - book.evicted_base,
                           "lost": book.lost, "in_flight": book.in_flight, "deaths": book.deaths,
                           "sampled": book.sampled_before + int(last.get("sampled", 0)) - book.sampled_base})
        total = {k: sum(s[k] for s in shards) for k in ("held", "evicted", "lost", "in_flight", "sampled")}
        return dict(total, produced=self.produced, learned=0 if self.learner is None else self.learner.records_learned,
                    updates=self.total_updates, shards=shards)
