"""`Prefetcher`: a background thread that stages the next batches (and their host-to-device copies) ahead of use.

Not a component: a batch's size is only known when it arrives, so staging happens
in Python rather than in variables sized at build.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

import numpy as np

from harness.backends import BACKENDS, Backend, get_backend

__all__ = ["Prefetcher"]


def _resolve(backend: Any) -> Backend | None:
    """None, a `Backend`, or a backend built from its name (``"tf"``/``"torch"``) for its `Backend.to_device`."""
    if backend is None or isinstance(backend, Backend):
        return backend
    if backend not in BACKENDS:
        raise ValueError(f"Prefetcher: backend must be one of {[None, *BACKENDS]} or a Backend; got {backend!r}")
    return get_backend(backend)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class Prefetcher:
    """Calls ``fn()`` on a background thread and keeps up to ``depth`` results staged for `next`.

    With a ``backend``, each staged batch is also moved to ``device`` on the
    background thread by the backend's `Backend.to_device` (PyTorch: tensors copied
    with ``non_blocking=True`` from pinned memory when the target is a CUDA device;
    TF: ``tf.identity`` under ``tf.device``). So the host-to-device copy of batch k+1
    overlaps the compute on batch k. On a CPU-only machine the "copy" is a plain
    copy (or none) and the overlap is only that of two Python threads.

    ``fn`` raising `StopIteration` ends the stream (`next` then raises
    `StopIteration`); any other exception stops the thread and is re-raised by the
    `next` call that reaches it. ``fn`` should not block forever, or `close` can
    only wait for it up to its ``timeout`` (e.g. give ``BlockingQueue.get`` a
    timeout, or close that queue first).

    Args:
        fn: returns the next batch (an array or tensor, or a dict/tuple of them).
        depth: the most batches staged ahead, a positive int.
        backend: None (results passed as they are), ``"torch"``, ``"tf"`` or a `Backend`
            (e.g. ``executor.backend``).
        device: the target device (torch ``"cuda:0"``, TF ``"/GPU:0"``); None picks the
            first GPU when there is one, else the CPU.

    Raises:
        ValueError: naming ``depth`` or ``backend`` when invalid.
    """

    def __init__(self, fn: Callable[[], Any], depth: int = 1, backend: str | Backend | None = None,
                 device: str | None = None) -> None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth <= 0:
            raise ValueError(f"Prefetcher: depth must be a positive int; got {depth!r}")
        self.backend = _resolve(backend)
        if not callable(fn):
            raise ValueError(f"Prefetcher: fn must be callable; got {fn!r}")
        self.fn = fn
        self.depth = int(depth)
        self.device = device
        self._staged: queue.Queue = queue.Queue(maxsize=self.depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="Prefetcher", daemon=True)
        self._thread.start()

    def _offer(self, item: Any) -> bool:
        """Puts ``item`` once there is room; False when stopped first."""
        while not self._stop.is_set():
            try:
                self._staged.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = self.fn()
                if self.backend is not None:
                    item = self.backend.to_device(item, self.device)
            except StopIteration:
                self._offer(_END)
                return
            except BaseException as error:  # noqa: BLE001 - handed to the consumer by next()
                if not self._stop.is_set():
                    self._offer(_Failure(error))
                return
            if not self._offer(item):
                return

    def next(self, timeout: float | None = None) -> Any:
        """The next staged batch, in the order ``fn`` returned them.

        Args:
            timeout: the most seconds to wait for one; None waits as long as it takes.

        Raises:
            queue.Empty: when the timeout passes first.
            StopIteration: once ``fn`` has ended the stream.
            RuntimeError: after `close`.
            Exception: whatever ``fn`` raised, once the batches before it are taken.
        """
        if self._finished:
            raise StopIteration
        if self._stop.is_set():
            raise RuntimeError("Prefetcher.next: the prefetcher is closed")
        item = self._staged.get(timeout=timeout)
        if item is _END:
            self._finished = True
            raise StopIteration
        if isinstance(item, _Failure):
            self._finished = True
            raise item.error
        return item

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        return self.next()

    def close(self, timeout: float = 5.0) -> None:
        """Stops the thread and joins it, dropping staged batches.

        Args:
            timeout: the most seconds to wait for a running ``fn()`` call to return.

        Raises:
            TimeoutError: when the thread is still in ``fn()`` after ``timeout``.
        """
        self._stop.set()
        while True:
            try:
                self._staged.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"Prefetcher.close: fn() did not return within {timeout} s; the thread (a daemon) "
                               f"is left to finish")

    @property
    def alive(self) -> bool:
        """Whether the background thread is running."""
        return self._thread.is_alive()

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
