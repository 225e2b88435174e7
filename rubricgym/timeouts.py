"""Run a function under a hard wall-time limit in a reusable worker process.

Python cannot interrupt a thread stuck in a long computation, and ``signal.alarm`` (what
math-verify uses) works only on the main thread. A worker process can always be killed, so
checks that may hang run here when the caller is not on the main thread. The worker is started
once (``spawn``, safe next to torch threads) and reused; a call that times out kills it and
the next call starts a fresh one.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import threading
from typing import Any, Callable


class WorkerTimeout(TimeoutError):
    """The function did not finish within its time limit (the worker was killed)."""


def _serve(conn: Any) -> None:
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, fn(*args)))
        except Exception as err:  # the caller re-raises it
            conn.send((False, err))


class TimeLimitedWorker:
    """One worker process that runs picklable module-level functions with a time limit.

    Example:
        >>> worker = TimeLimitedWorker()
        >>> worker.call(pow, (2, 10), timeout=10.0)
        1024
        >>> worker.close()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float) -> Any:
        # Calls are serialised: one worker, one request at a time.
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            self._conn.send((fn, args))
            if not self._conn.poll(timeout):
                self._kill()
                raise WorkerTimeout(f"{getattr(fn, '__name__', fn)} took longer than {timeout:g} s")
            try:
                ok, value = self._conn.recv()
            except EOFError:  # the worker died (e.g. out of memory)
                self._kill()
                raise WorkerTimeout(f"{getattr(fn, '__name__', fn)}: the worker process died") from None
        if ok:
            return value
        raise value

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        with self._lock:
            self._kill()


_shared_worker: TimeLimitedWorker | None = None
_shared_lock = threading.Lock()


def shared_worker() -> TimeLimitedWorker:
    """The process-wide worker (started on first use, closed at exit)."""
    global _shared_worker
    with _shared_lock:
        if _shared_worker is None:
            _shared_worker = TimeLimitedWorker()
            atexit.register(_shared_worker.close)
        return _shared_worker
