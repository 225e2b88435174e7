"""A sandboxed Python execution tool any env can offer (``tools=["python"]``).

The boundary is an established isolation tool, not Python: each call runs the code with
`bubblewrap <https://github.com/containers/bubblewrap>`_ (Debian's ``bubblewrap``) in fresh
namespaces of every kind (user, PID, network, IPC, UTS, cgroup, mount):

* the filesystem is a read-only bind of ``/usr`` (the system Python and its standard library)
  on a read-only root, plus one private ``tmpfs`` (``/work`` and ``/dev/shm``) limited in bytes
  and in inodes (files): its size is host memory, so a flood of files stops there. bubblewrap
  cannot limit inodes, so a few lines of trusted setup (:data:`_REAPER`) mount that tmpfs in a
  user and mount namespace of their own before starting bubblewrap; nothing else of the host
  exists inside: no ``/etc``, ``/root``, ``/home``, other episodes' folders or the project;
* a seccomp filter (:func:`seccomp_filter`, loaded by bubblewrap's ``--seccomp``) refuses new
  namespaces (``unshare``, ``setns``, namespace flags of ``clone``; ``clone3`` answers ENOSYS so
  libc falls back to ``clone``), io_uring, bpf, ptrace, the keyring, perf events, userfaultfd,
  cross-process memory access and every mount call, and bubblewrap's ``--disable-userns`` also
  forbids user namespaces inside;
* no network (an empty network namespace) and no view of other processes (its own PID
  namespace), no capabilities, a new session, killed with its parent;
* as the unprivileged user ``nobody`` when the trainer runs as root, with rlimits: CPU seconds,
  address space, file size, open files and processes (``RLIMIT_NPROC``);
* wall time: the whole process group is killed at the limit; output is read as it streams and
  the process is killed once ``max_output_bytes`` is exceeded, so a flood cannot grow the trainer.

The audit-hook prelude of earlier versions still runs inside (clearer error messages), but it
is not the boundary. Where bubblewrap is missing or cannot create namespaces, the ``python``
tool refuses to start; ``tools=["python-audit-hook"]`` opts into the weaker guard by name (a
subprocess with rlimits, ``unshare -rn`` where it works, and the audit hook, which code in the
same interpreter can defeat).

A contained violation is reported as a tool error (``Error: ...``); the env stays usable.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass

from pydantic import BaseModel, Field

from rubricgym.tools import Tool, ToolError, tool_seconds_left

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
    """The whole process group is killed after this long."""
    cpu_time_s: int = 5
    memory_bytes: int = 512 * 2**20
    """Address-space limit of each process."""
    max_file_bytes: int = 1 * 2**20
    """Largest file the code may write."""
    max_output_bytes: int = 8_000
    """Output kept; the code is stopped once it prints more."""
    max_open_files: int = 64
    max_processes: int = 16
    """Processes the code may run at once (``RLIMIT_NPROC``; fork bombs stop there)."""
    scratch_bytes: int = 16 * 2**20
    """Size of the private scratch tmpfs (``/work`` and ``/dev/shm`` share it; host memory)."""
    scratch_inodes: int = 4096
    """Files and folders the scratch tmpfs holds (each costs host memory outside ``scratch_bytes``)."""
    isolation: str = "bwrap"
    """``"bwrap"`` (the boundary) or ``"audit-hook"`` (the weaker guard, by explicit choice)."""
    network_namespace: bool = True
    """Audit-hook mode: use ``unshare -rn`` when available (the hook blocks sockets either way)."""


NOBODY = 65534
SANDBOX_PYTHON = "/usr/bin/python3"
#: the sandbox's file system: read-only system files, the scratch tmpfs (bound by the setup from the
#: folder given as ``{scratch}``), and a read-only root and /dev; nothing else
_BWRAP_MOUNTS = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                 "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
                 "--bind", "{scratch}/work", "/work", "--bind", "{scratch}/shm", "/dev/shm",
                 "--remount-ro", "/dev", "--remount-ro", "/"]

# Syscalls the seccomp filter refuses (EPERM), by machine: (audit arch, {name: number}). The clone
# flags that make namespaces are refused too; clone3 answers ENOSYS (its flags sit in memory a
# classic BPF filter cannot read), which makes libc fall back to clone.
_SECCOMP_REFUSED = ("unshare", "setns", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "ptrace",
                    "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd", "process_vm_readv",
                    "process_vm_writev", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
                    "fsconfig", "fsmount", "fspick", "mount_setattr")
#: syscall numbers as (x86_64, aarch64)
_SYSCALL_NUMBERS = {
    "unshare": (272, 97), "setns": (308, 268), "clone": (56, 220), "clone3": (435, 435), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "bpf": (321, 280), "ptrace": (101, 117),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "perf_event_open": (298, 241),
    "userfaultfd": (323, 282), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "mount": (165, 40),
    "umount2": (166, 39), "pivot_root": (155, 41), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
}
_SYSCALLS = {machine: (arch, {name: numbers[column] for name, numbers in _SYSCALL_NUMBERS.items()})
             for column, (machine, arch) in enumerate((("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)))}
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000


def seccomp_filter(machine: str | None = None) -> bytes:
    """The seccomp program bubblewrap loads (``--seccomp FD``): classic BPF over ``seccomp_data``
    (syscall number at offset 0, audit arch at 4, the first argument's low word at 16). Another
    architecture's calls (and x86's x32 ABI) are refused whole.

    Examples:
        >>> program = seccomp_filter("x86_64")
        >>> len(program) % 8, len(program) // 8 > len(_SECCOMP_REFUSED)
        (0, True)
    """
    import struct

    machine = machine or os.uname().machine
    if machine not in _SYSCALLS:
        raise ValueError(f"no seccomp filter for {machine!r} (known: {', '.join(_SYSCALLS)})")
    arch, numbers = _SYSCALLS[machine]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets below
    program: list[tuple[int, str | None, str | None, int]] = [(load, None, None, 4), (jeq, None, "kill", arch),
                                                              (load, None, None, 0)]
    if machine == "x86_64":
        program.append((jge, "eperm", None, 0x40000000))  # the x32 ABI's numbers
    program += [(jeq, "eperm", None, numbers[name]) for name in _SECCOMP_REFUSED]
    program += [(jeq, "enosys", None, numbers["clone3"]), (jeq, None, "allow", numbers["clone"]),
                (load, None, None, 16), (jset, "eperm", "allow", _CLONE_NAMESPACES)]
    labels = {"allow": (ret, 0x7FFF0000), "eperm": (ret, 0x00050000 | 1), "enosys": (ret, 0x00050000 | 38),
              "kill": (ret, 0x80000000)}
    where = {name: len(program) + i for i, name in enumerate(labels)}
    code = b""
    for pc, (op, true, false, k) in enumerate(program):
        jt = where[true] - pc - 1 if true else 0
        jf = where[false] - pc - 1 if false else 0
        code += struct.pack("=HBBI", op, jt, jf, k)
    return code + b"".join(struct.pack("=HBBI", op, 0, 0, k) for op, k in labels.values())


def _user_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as handle:
                    count += any(line.startswith("Uid:") and line.split()[1] == str(uid) for line in handle)
            except OSError:
                continue
    return count


def _limit_child(limits: SandboxLimits, as_nobody: bool):
    # RLIMIT_NPROC counts every process of the real user: as nobody that is only the sandbox's;
    # as the caller's own user, the limit sits above what that user already runs
    extra_processes = 0 if as_nobody else _user_processes(os.getuid())

    def apply() -> None:
        os.setsid()
        if as_nobody:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        processes = limits.max_processes + extra_processes + 3  # + the reaper and bubblewrap's two
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_time_s, limits.cpu_time_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.max_open_files, limits.max_open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


_bwrap_works: dict[bool, str | None] = {}


def bwrap_problem(as_nobody: bool | None = None) -> str | None:
    """Why bubblewrap cannot run the sandbox here (None when it can); checked once per process."""
    as_nobody = (os.geteuid() == 0) if as_nobody is None else as_nobody
    if as_nobody not in _bwrap_works:
        if shutil.which("bwrap") is None:
            _bwrap_works[as_nobody] = "bubblewrap is not installed (apt-get install bubblewrap)"
        elif not os.path.exists(SANDBOX_PYTHON):
            _bwrap_works[as_nobody] = f"{SANDBOX_PYTHON} (the system Python the sandbox runs) is missing"
        else:
            try:
                output, code, _ = _run_bwrap(b"print('ok')", dataclasses.replace(SandboxLimits(), wall_time_s=30), as_nobody)
                ok = code == 0 and output.strip() == "ok"
                _bwrap_works[as_nobody] = None if ok else f"bubblewrap failed: {output[-300:]}"
            except (OSError, ValueError, subprocess.SubprocessError) as err:
                _bwrap_works[as_nobody] = f"bubblewrap failed: {err}"
    return _bwrap_works[as_nobody]


# A tiny reaper runs bubblewrap: it is a child subreaper, so whatever the sandbox leaves behind is
# reparented to it and reaped (a container's PID 1 often reaps nothing, and zombies of ``nobody``
# would count against RLIMIT_NPROC until no sandbox could start); SIGTERM or its own alarm kills
# the sandbox, and it exits only when every descendant is gone. Its child first enters a user and
# mount namespace of its own and mounts the scratch tmpfs with a size and an inode limit (which
# bubblewrap's --size cannot set) on the given folder, then starts bubblewrap, which binds it.
# argv: wall seconds, scratch folder, tmpfs options, command...
_REAPER = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)
child = os.fork()
if child == 0:
    try:
        uid, gid = os.getuid(), os.getgid()
        libc.prctl(4, 1, 0, 0, 0)  # dumpable again after the setuid: /proc/self/*_map are ours to write
        if libc.unshare(0x10000000 | 0x00020000) != 0:
            raise OSError(ctypes.get_errno(), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
        scratch = sys.argv[2].encode()
        if libc.mount(b"tmpfs", scratch, b"tmpfs", 2 | 4 | 8, sys.argv[3].encode()) != 0:  # nosuid nodev noexec
            raise OSError(ctypes.get_errno(), "mount")
        os.mkdir(sys.argv[2] + "/work")
        os.mkdir(sys.argv[2] + "/shm")
        os.execvp(sys.argv[4], sys.argv[4:])
    except OSError as err:
        print(f"sandbox setup failed: {err}", flush=True)
        os._exit(125)
def stop(*_):
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGALRM, stop)
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[1]))
status = None
while True:
    try:
        pid, st = os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if pid == child:
        status = st
code = os.waitstatus_to_exitcode(status) if status is not None else 1
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def _bwrap_command(limits: SandboxLimits, scratch: str, seccomp_fd: int) -> list[str]:
    """The reaper and bubblewrap, as run for one execution (``scratch``: an empty host folder the
    setup mounts the tmpfs on, in its own namespace; ``seccomp_fd``: the filter, passed open)."""
    options = f"size={limits.scratch_bytes},nr_inodes={limits.scratch_inodes},mode=0755"
    mounts = [arg.replace("{scratch}", scratch) for arg in _BWRAP_MOUNTS]
    return [SANDBOX_PYTHON, "-I", "-S", "-c", _REAPER, str(limits.wall_time_s), scratch, options,
            "bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL", "--seccomp", str(seccomp_fd),
            *mounts, "--chdir", "/work", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work", "--setenv", "TMPDIR", "/work",
            "--setenv", "PYTHONIOENCODING", "utf-8", SANDBOX_PYTHON, "-I", "-S", "-"]


def _run_bwrap(program: bytes, limits: SandboxLimits, as_nobody: bool) -> tuple[str, int | None, str | None]:
    scratch = tempfile.mkdtemp(prefix="rubricgym-scratch-")  # stays empty on the host: the mount is private
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, seccomp_filter())  # a few hundred bytes: the pipe holds them
        os.close(write_end)
        if as_nobody:
            os.chown(scratch, NOBODY, NOBODY)
        return _run(_bwrap_command(limits, scratch, read_end), program, limits, cwd=None, env=None,
                    as_nobody=as_nobody, pass_fds=(read_end,))
    finally:
        os.close(read_end)
        try:
            os.rmdir(scratch)
        except OSError:
            pass


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


def _read_capped(process: subprocess.Popen, limits: SandboxLimits) -> tuple[bytes, str | None]:
    """Read the output as it streams; stop the code at the wall-time or output limit."""
    deadline = time.monotonic() + limits.wall_time_s
    chunks, size, problem = [], 0, None
    fd = process.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            problem = f"the code ran longer than {limits.wall_time_s:.3g} s and was stopped"
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limits.max_output_bytes:
            problem = f"the code printed over {limits.max_output_bytes:,} bytes and was stopped; the first ones are shown"
            break
    if problem is not None:
        try:
            process.terminate()  # the reaper kills the sandbox, reaps it and exits
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the last resort (and the audit-hook mode's way)
        except ProcessLookupError:
            pass
    process.stdout.close()
    process.wait()
    return b"".join(chunks), problem


def run_python(code: str, limits: SandboxLimits | None = None) -> tuple[str, int | None, str | None]:
    """Run ``code``; returns ``(output, exit code or None, problem or None)``."""
    limits = limits or SandboxLimits()
    program = (_PRELUDE + "\n" + code).encode("utf-8", errors="replace")
    if limits.isolation == "bwrap":
        as_nobody = os.geteuid() == 0
        problem = bwrap_problem(as_nobody)
        if problem:
            raise ToolError(f"the python sandbox cannot run here: {problem}")
        return _run_bwrap(program, limits, as_nobody)
    if limits.isolation != "audit-hook":
        raise ValueError(f"isolation must be 'bwrap' or 'audit-hook', got {limits.isolation!r}")
    workdir = tempfile.mkdtemp(prefix="rubricgym-sandbox-")
    try:
        env = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8", "HOME": workdir, "TMPDIR": workdir}
        return _run(_network_prefix(limits) + [sys.executable, "-I", "-S", "-"], program, limits, workdir, env, False)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(command: list[str], program: bytes, limits: SandboxLimits, cwd: str | None, env: dict | None,
         as_nobody: bool, pass_fds: tuple[int, ...] = ()) -> tuple[str, int | None, str | None]:
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, preexec_fn=_limit_child(limits, as_nobody), pass_fds=pass_fds)
    try:
        process.stdin.write(program)  # the program is read before it runs: no deadlock with its output
        process.stdin.close()
    except BrokenPipeError:
        pass
    output, problem = _read_capped(process, limits)
    text = output[: limits.max_output_bytes].decode("utf-8", errors="replace")
    code_ = process.returncode
    if problem is None and code_ is not None and code_ < 0:
        signame = signal.Signals(-code_).name
        problem = {"SIGXCPU": "the code used more CPU time than allowed", "SIGXFSZ": "the code wrote a file over the size limit",
                   "SIGKILL": "the code was killed (memory or time limit)"}.get(signame, f"the code was killed by {signame}")
    elif problem is None and code_ != 0:
        problem = "the code raised an error"
    return text, code_, problem


class PythonArgs(BaseModel):
    code: str = Field(min_length=1, max_length=20_000, description="Python code to run; print what you need to see.")


def python_tool(limits: SandboxLimits | None = None) -> Tool:
    """The ``python`` tool: runs the code in the bubblewrap sandbox and returns its output.

    Refuses to start (``RuntimeError`` at env construction) where bubblewrap cannot run.
    """
    limits = limits or SandboxLimits()
    if limits.isolation == "bwrap" and (problem := bwrap_problem()):
        raise RuntimeError(f"tools=['python'] needs a working bubblewrap sandbox: {problem}. "
                           "tools=['python-audit-hook'] accepts the weaker in-process guard instead.")

    def run(args: PythonArgs) -> str:
        seconds = tool_seconds_left(limits.wall_time_s)  # the step's tool budget may end sooner
        if seconds < 0.1:
            raise ToolError("not run: this reply's tool calls used their time")
        output, _, problem = run_python(textwrap.dedent(args.code), dataclasses.replace(limits, wall_time_s=seconds))
        if problem:
            raise ToolError(f"{problem}\n{output[-2000:]}".strip())
        return output if output.strip() else "(no output)"

    return Tool("python", "Run Python code in a sandbox (no network, no files outside a scratch folder, a few "
                "seconds of CPU) and return what it prints.", PythonArgs, run)


def audit_hook_python_tool() -> Tool:
    """``tools=["python-audit-hook"]``: the same tool behind the weaker guard (chosen by name)."""
    return python_tool(SandboxLimits(isolation="audit-hook"))
