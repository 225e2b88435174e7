"""A sandboxed Python execution tool any env can offer (``tools=["python"]``).

Each call runs the code in a fresh ``python -I`` subprocess, in a temporary working directory
that is deleted afterwards, under layered limits:

* OS limits (``resource``): CPU seconds, address space, file size, open files, and no new
  processes (``RLIMIT_NPROC``), so fork bombs and memory hogs fail inside the child;
* wall time: the whole process group is killed at the limit (infinite loops, sleeping code);
* output: at most ``max_output_bytes`` of stdout + stderr are kept, the rest is dropped;
* no network: the child runs in a new network namespace (``unshare -rn``) where the machine
  allows it, and an audit hook refuses sockets in any case;
* files: a Python audit hook (PEP 578, which code cannot remove) refuses opening files for
  writing outside the working directory, reading outside it and the Python installation,
  starting processes, and loading native code through ctypes.

A contained violation is reported as a tool error (``Error: ...``); the env stays usable.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass

from pydantic import BaseModel, Field

from rubricgym.tools import Tool, ToolError

_PRELUDE = r'''
import sys, os
_cwd = os.path.realpath(os.getcwd())
_ro = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path) if p})
_denied = ("socket.", "subprocess.", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.system",
           "os.kill", "os.killpg", "ctypes.", "pty.", "shutil.rmtree", "os.chdir", "os.chmod", "os.chown", "os.link",
           "os.symlink", "os.truncate", "sys.remote_exec", "winreg.")
def _inside(path, roots):
    try:
        real = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else "")
    except Exception:
        return False
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)
def _hook(event, args):
    if event.startswith(_denied):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open":
        path, mode = args[0], args[1]
        if isinstance(path, int):
            return
        writing = mode is not None and any(c in str(mode) for c in "wax+")
        if isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC):
            writing = True
        roots = (_cwd,) if writing else (_cwd,) + _ro
        if not _inside(path, roots):
            raise PermissionError(f"sandbox: {'writing' if writing else 'reading'} {path!r} is outside the working directory")
    if event in ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.replace", "os.unlink") and args:
        if not _inside(args[0], (_cwd,)):
            raise PermissionError(f"sandbox: {event} outside the working directory")
sys.addaudithook(_hook)
del _hook
'''


@dataclass
class SandboxLimits:
    """Limits of one execution."""

    wall_time_s: float = 5.0
    cpu_time_s: int = 5
    memory_bytes: int = 512 * 2**20
    max_file_bytes: int = 1 * 2**20
    max_output_bytes: int = 8_000
    max_open_files: int = 64
    network_namespace: bool = True
    """Use ``unshare -rn`` when available (the audit hook blocks sockets either way)."""


def _limit_child(limits: SandboxLimits):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


_unshare_works: bool | None = None


def _network_prefix(limits: SandboxLimits) -> list[str]:
    global _unshare_works
    if not limits.network_namespace or shutil.which("unshare") is None:
        return []
    if _unshare_works is None:
        try:
            _unshare_works = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=5).returncode == 0
        except (OSError, subprocess.SubprocessError):
            _unshare_works = False
    return ["unshare", "-rn"] if _unshare_works else []


def run_python(code: str, limits: SandboxLimits | None = None) -> tuple[str, int | None, str | None]:
    """Run ``code``; returns ``(output, exit code or None, problem or None)``."""
    limits = limits or SandboxLimits()
    workdir = tempfile.mkdtemp(prefix="rubricgym-sandbox-")
    try:
        script = os.path.join(workdir, "main.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(_PRELUDE + "\n" + code)
        env = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8", "HOME": workdir, "TMPDIR": workdir}
        command = _network_prefix(limits) + [sys.executable, "-I", "-S", script]
        process = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, preexec_fn=_limit_child(limits))
        try:
            output, _ = process.communicate(timeout=limits.wall_time_s)
            problem = None
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            problem = f"the code ran longer than {limits.wall_time_s:g} s and was stopped"
        text = output[: limits.max_output_bytes].decode("utf-8", errors="replace")
        if len(output) > limits.max_output_bytes and problem is None:
            problem = f"the code printed {len(output):,} bytes; only the first {limits.max_output_bytes:,} are shown"
        code_ = process.returncode
        if problem is None and code_ is not None and code_ < 0:
            signame = signal.Signals(-code_).name
            problem = {"SIGXCPU": "the code used more CPU time than allowed", "SIGXFSZ": "the code wrote a file over the size limit",
                       "SIGKILL": "the code was killed (memory or time limit)"}.get(signame, f"the code was killed by {signame}")
        elif problem is None and code_ != 0:
            problem = "the code raised an error"
        return text, code_, problem
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class PythonArgs(BaseModel):
    code: str = Field(min_length=1, max_length=20_000, description="Python code to run; print what you need to see.")


def python_tool(limits: SandboxLimits | None = None) -> Tool:
    """The ``python`` tool: runs the code in the sandbox and returns its output."""

    def run(args: PythonArgs) -> str:
        output, _, problem = run_python(textwrap.dedent(args.code), limits)
        if problem:
            raise ToolError(f"{problem}\n{output[-2000:]}".strip())
        return output if output.strip() else "(no output)"

    return Tool("python", "Run Python code in a sandbox (no network, no files outside a scratch folder, a few "
                "seconds of CPU) and return what it prints.", PythonArgs, run)
