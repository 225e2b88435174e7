"""Run a function under a hard wall-time limit (and, where results depend on it, a CPU-time budget)
in a reusable worker process.

Python cannot interrupt a thread stuck in a long computation, and ``signal.alarm`` (what
math-verify uses) works only on the main thread. A worker process can always be killed, so
checks that may hang run here when the caller is not on the main thread.

The worker is a plain ``python -c`` subprocess talking over a socket pair,
not a ``multiprocessing`` child: ``spawn`` re-imports the caller's ``__main__``, which re-runs a
user's script that lacks an ``if __name__ == "__main__"`` guard. It is started once and reused;
its start-up (and an optional ``prepare`` step, such as importing math-verify) has its own
generous limit and never counts against a call's time limit; a call that times out kills it, and
the next call starts a fresh one. Functions must be importable module-level functions.
"""

from __future__ import annotations

import atexit
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any, Callable

#: limit on starting the worker and running its ``prepare`` step (imports), under load too
STARTUP_TIMEOUT_S = 120.0


class WorkerTimeout(TimeoutError):
    """The function did not finish within its time limit (the worker was killed)."""


class CPUTimeExceeded(TimeoutError):
    """The function used up its CPU-time budget (the worker lives on). Unlike a wall-clock limit,
    this does not depend on what else the machine runs: the same check gets the same outcome idle
    or loaded."""


class _BudgetSignal(BaseException):
    # a BaseException, so that library code's `except Exception` cannot swallow the interruption
    pass


def _on_budget(signum: int, frame: Any) -> None:
    raise _BudgetSignal


def _cpu_budgeted(fn: Callable[..., Any], args: tuple[Any, ...], cpu_s: float) -> Any:
    """Worker side: ``fn(*args)`` with at most ``cpu_s`` seconds of this process's CPU time
    (``ITIMER_PROF``: user + system time; the worker is single-threaded, so it is the call's own)."""
    import signal

    previous = signal.signal(signal.SIGPROF, _on_budget)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    try:
        return fn(*args)
    except _BudgetSignal:
        raise CPUTimeExceeded(f"{getattr(fn, '__name__', fn)} used its {cpu_s:g} s of CPU time") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


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


WORKER_MAIN = "import sys; from multiprocessing.connection import Connection; from rubricgym.timeouts import _serve; _serve(Connection(int(sys.argv[1])))"


def _ready() -> bool:
    return True


class TimeLimitedWorker:
    """One worker process that runs picklable module-level functions with a time limit.

    Examples:
        >>> worker = TimeLimitedWorker()
        >>> worker.call(pow, (2, 10), timeout=10.0)
        1024
        >>> worker.close()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._prepared: set[Callable[[], Any]] = set()

    def _start(self) -> None:
        parent, child = socket.socketpair()
        # `-c`, not `-m rubricgym.timeouts`: runpy warns when the package already imported the module
        self._process = subprocess.Popen([sys.executable, "-c", WORKER_MAIN, str(child.fileno())],
                                         pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
        child.close()
        self._conn = Connection(parent.detach())
        self._prepared = set()
        self._run(_ready, (), STARTUP_TIMEOUT_S, "starting the worker")

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float, what: str) -> tuple[bool, Any]:
        self._conn.send((fn, args))
        if not self._conn.poll(timeout):
            self._kill()
            raise WorkerTimeout(f"{what} took longer than {timeout:g} s")
        try:
            return self._conn.recv()
        except (EOFError, OSError):  # the worker died (e.g. out of memory)
            self._kill()
            raise WorkerTimeout(f"{what}: the worker process died") from None

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float,
             prepare: Callable[[], Any] | None = None, cpu_s: float | None = None) -> Any:
        """``fn(*args)`` in the worker within ``timeout`` seconds of wall time (else
        :class:`WorkerTimeout`, the worker killed) and, with ``cpu_s``, within that much CPU time
        (else :class:`CPUTimeExceeded`: the load-independent limit, for results that depend on it);
        ``prepare()`` runs first, once per worker, under the start-up limit (put slow imports there)."""
        if cpu_s is not None:
            fn, args = _cpu_budgeted, (fn, args, cpu_s)
        with self._lock:  # one worker, one request at a time
            if self._process is None or self._process.poll() is not None:
                self._kill()
                self._start()
            if prepare is not None and prepare not in self._prepared:
                ok, value = self._run(prepare, (), STARTUP_TIMEOUT_S, f"preparing {getattr(prepare, '__name__', prepare)}")
                if not ok:
                    raise value
                self._prepared.add(prepare)
            ok, value = self._run(fn, args, timeout, getattr(fn, "__name__", str(fn)))
        if ok:
            return value
        raise value

    def _kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None

    def close(self) -> None:
        with self._lock:
            self._kill()

    def stop(self) -> None:
        """Kill the process without waiting for a call in flight (which then fails as a dead worker)."""
        process = self._process
        if process is not None:
            process.kill()


class WorkerPool:
    """Up to ``size`` :class:`TimeLimitedWorker` s, started as they are needed. A call takes a free
    worker (or starts one, or waits for one when all ``size`` are busy) and holds only that worker:
    one caller's slow check, timeout or worker restart never holds up another's (one shared worker
    behind one lock took another session's step from 2.7 ms to 7.6 s). Same ``call`` as a worker.

    Examples:
        >>> pool = WorkerPool(size=2)
        >>> pool.call(pow, (2, 10), timeout=10.0)
        1024
        >>> pool.close()
    """

    def __init__(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got size={size!r}")
        self.size = size
        self._free: list[TimeLimitedWorker] = []
        self._all: list[TimeLimitedWorker] = []
        self._ready = threading.Condition()

    @property
    def busy(self) -> int:
        """Workers running a call now."""
        with self._ready:
            return len(self._all) - len(self._free)

    def _take(self) -> TimeLimitedWorker:
        with self._ready:
            while not self._free and len(self._all) >= self.size:
                self._ready.wait()
            if self._free:
                return self._free.pop()
            worker = TimeLimitedWorker()  # its process starts in its first call, outside this lock
            self._all.append(worker)
            return worker

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], timeout: float,
             prepare: Callable[[], Any] | None = None, cpu_s: float | None = None) -> Any:
        """:meth:`TimeLimitedWorker.call` on a worker of the pool's own."""
        worker = self._take()
        try:
            return worker.call(fn, args, timeout, prepare, cpu_s)
        finally:
            with self._ready:
                self._free.append(worker)
                self._ready.notify()

    def close(self) -> None:
        """Close the free workers and kill the busy ones (their calls fail as a dead worker)."""
        with self._ready:
            free, busy = list(self._free), [w for w in self._all if w not in self._free]
        for worker in free:
            worker.close()
        for worker in busy:
            worker.stop()


def pool_size() -> int:
    """Workers of the shared pool: ``$RUBRICGYM_GRADER_WORKERS``, else up to 4 (never more than the
    machine's cores: each check is CPU-bound). Only started when concurrent checks need them."""
    import os

    value = os.environ.get("RUBRICGYM_GRADER_WORKERS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"RUBRICGYM_GRADER_WORKERS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, min(4, os.cpu_count() or 1))


_shared_pool: WorkerPool | None = None
_shared_lock = threading.Lock()


def shared_worker() -> WorkerPool:
    """The process-wide pool of checking workers (started on first use, closed at exit)."""
    global _shared_pool
    with _shared_lock:
        if _shared_pool is None:
            _shared_pool = WorkerPool(pool_size())
            atexit.register(_shared_pool.close)
        return _shared_pool


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
