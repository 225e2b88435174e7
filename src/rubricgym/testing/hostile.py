"""A hostile agent and a hostile judge, for the fuzz benchmark and the property tests.

* :func:`hostile_action` draws one action a broken or malicious policy could send: deeply nested
  and broken JSON in tool calls (as text and as assistant dicts), huge and repeated markup, lone
  surrogates, huge and non-finite numbers in arguments, wrong types, unknown tools; JSON integers
  past Python's 4,300-digit limit, Python objects JSON cannot hold in dict-form arguments (numpy
  scalars and arrays, bytes, sets, complex, tuple and int keys), floods of thousands of tool
  calls, k slow python calls in one reply, and nested LaTeX that backtracking regexes choke on;
* :data:`ESCAPES` are sandbox escape attempts (each with the text that would prove it worked);
* :func:`fuzz_env` steps an env through hostile episodes and counts what went wrong.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rubricgym.data import CHECKOUT_ROOT

TOOL_NAMES = ("calculator", "search", "python", "issue_refund", "get_order", "find_customer", "nope", "")
NUMBERS = (0, -1, 2**63, 10**30, -(10**300), 1e-300, 1e308, float("nan"), float("inf"), -0.0, 3.5, True, None)


def _deep(rng: random.Random) -> str:
    depth = rng.choice((50, 500, 2000, 10_000))
    opener, closer = rng.choice((("[", "]"), ('{"a":', "}")))
    return opener * depth + ("1" if opener == "[" else "1") + closer * depth


def _arguments(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return {rng.choice(("order_id", "amount", "expression", "query", "code", "email")): rng.choice(NUMBERS)}
    if kind == 1:
        return {"expression": rng.choice(("factorial(+1999)", "9**9**9", "1/0", "(" * 500 + "1" + ")" * 500, "x" * 5000))}
    if kind == 2:
        nested: dict = {}
        inner = nested
        for _ in range(rng.choice((10, 100, 900))):
            inner["x"] = {}
            inner = inner["x"]
        return nested
    if kind == 3:
        return rng.choice(("not json", "", "[1, 2]", "null", _deep(rng)))
    if kind == 4:
        return {"order_id": 1, "amount": rng.choice(NUMBERS), "reason": "\ud800" * rng.randrange(3)}
    return {"query": rng.choice(("", " ", "\x00", "a" * 10_000, "REF-01"))}


def _huge_int(rng: random.Random) -> str:
    """A JSON integer past the 4,300 digits Python's int() reads."""
    return "9" * rng.choice((4301, 5000, 20_000))


def _python_objects(rng: random.Random) -> dict:
    """Dict-form arguments a Python agent may send that JSON cannot hold (or holds only converted)."""
    import numpy as np

    value = rng.choice((np.int64(7), np.float32(2.5), np.arange(3), np.bool_(True), b"bytes", {1, 2}, 1j, object(),
                        10 ** rng.choice((401, 5000)), (1, 2), np.array([[1.5, 2.0]]), np.array(["a"]), range(3)))
    key = rng.choice(("expression", "query", "code", "order_id", 1, (1, 2), None))
    return {key: value}


def _call_text(rng: random.Random) -> str:
    body = rng.choice((
        lambda: json.dumps({"name": rng.choice(TOOL_NAMES), "arguments": _arguments(rng)}, allow_nan=True),
        lambda: '{"name": "calculator", "arguments": {"expression": ' + _huge_int(rng) + '}}',
        lambda: '{"name": "' + rng.choice(TOOL_NAMES) + '", "arguments": "{\\"order_id\\": ' + _huge_int(rng) + '}"}',
        lambda: _deep(rng),
        lambda: '{"name": "calculator", "arguments": {"expression": "1+1"',
        lambda: "{'name': 'calculator'}",
        lambda: json.dumps({"name": None, "arguments": []}),
    ))()
    return f"<tool_call>{body}</tool_call>" if rng.random() < 0.8 else f"<tool_call>{body}"


def json_like_values():
    """A Hypothesis strategy for any JSON-like value a hostile peer writes: None, booleans, integers
    past 64 bits, NaN and infinities, text with lone surrogates, and lists / dicts of them (dict keys
    any text). (Hypothesis is a test dependency: imported here, when asked for.)"""
    from hypothesis import strategies as st

    return st.recursive(
        st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40) | st.floats(allow_nan=True)
        | st.text(alphabet=st.characters(codec=None), max_size=20),
        lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
        max_leaves=10)


def protocol_messages():
    """A Hypothesis strategy for what a hostile client sends a served env: any JSON-like value (dicts
    with keys of any text, lone surrogates, numbers past 64 bits, NaN), an object of a known message
    type with any data, or a step whose action is what :func:`hostile_action` draws. (Hypothesis
    is a test dependency: imported here, when asked for.)"""
    from hypothesis import strategies as st

    json_like = json_like_values()

    def hostile_step(seed: int) -> dict[str, Any]:
        action = hostile_action(random.Random(seed), max_chars=20_000)
        data = action if isinstance(action, dict) else {"content": action}
        return {"type": "step", "data": data}

    return st.one_of(
        json_like,
        st.builds(lambda kind, data: {"type": kind, "data": data},
                  st.sampled_from(["reset", "step", "state", "fly"]), json_like),
        st.integers(min_value=0, max_value=2**32).map(hostile_step),
    )


def protocol_frame(message: Any) -> str | None:
    """``message`` as a client's text frame (a lone surrogate escaped, NaN as JSON's extension);
    None where JSON cannot write it (a structure too deep, a value of no JSON type)."""
    try:
        return json.dumps(message, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return None


from rubricgym.utf8 import utf8_bytes as frame_bytes  # noqa: E402  (what a server's message limit counts)


def hostile_action(rng: random.Random, max_chars: int = 200_000) -> Any:
    """One action from a hostile agent (text, message dict, or a wrong type)."""
    kind = rng.randrange(10)
    if kind == 0:
        return _call_text(rng) * rng.choice((1, 2, 50))
    if kind == 1:
        arguments = _python_objects if rng.random() < 0.4 else _arguments
        return {"role": "assistant", "content": rng.choice((None, "", "x")),
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": rng.choice(TOOL_NAMES),
                                                                                  "arguments": arguments(rng)}}
                               for i in range(rng.choice((1, 2, 30, 10_001)))]}
    if kind == 2:  # huge and repeated markup
        unit = rng.choice(("\\boxed{", "<tool_call>", "</tool_call>", "{", "\\frac{", "$", "```", "[REF-01]", "9"))
        return unit * (rng.randrange(1, max_chars // len(unit)) if rng.random() < 0.5 else rng.randrange(1, 2000))
    if kind == 3:  # lone surrogates and control characters
        return rng.choice(("\ud800", "\udfff \\boxed{1}", "\x00\x01", "\u202e", "🙂" * 100)) + " \\boxed{2}"
    if kind == 4:  # huge and non-finite numbers as answers
        return "\\boxed{" + rng.choice(("9" * 3000, "1e309", "nan", "inf", "-0", "1/0", "10^{10^{10}}")) + "}"
    if kind == 5:  # wrong types
        return rng.choice((None, 42, 3.14, b"bytes", ["list"], {"role": "user", "content": "hi"}, {"content": 5},
                           {"role": "assistant", "tool_calls": "not a list"}, object()))
    if kind == 6:
        return "x" * rng.choice((max_chars, max_chars + 1, 2 * max_chars))
    if kind == 7:
        return rng.choice(("", " ", "\n" * 1000, "The answer is " + "1" * 5000 + ".5 days"))
    if kind == 8:
        return rng.choice((
            lambda: "So " + _deep(rng) + " \\boxed{" + str(rng.randrange(20)) + "}",
            # nested LaTeX: a backtracking \\text{...} pattern took 64 s on this one
            lambda: "\\boxed{\\text{" + " " * rng.choice((100, 6400, 50_000)) + "{}}}",
            lambda: "\\boxed{" + "\\frac{" * 3000 + "1" + "}{2}" * 3000 + "}",
            lambda: "\\boxed{" + "\\text{ " * 2000 + "x" + "}" * 2000 + "}",
            # floods: ten thousand tool calls in one reply, or k python calls that each run out the clock
            lambda: '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>' * 2500,
            # a rubricator's rubric with absurd numbers
            lambda: '{"items": [{"description": "checks the answer", "score": ' + _huge_int(rng) + '}]}',
            lambda: '{"items": [{"description": "x", "score": 1e999}, {"description": "y", "score": -' + _huge_int(rng) + '}]}',
        ) + ((lambda: ('<tool_call>{"name": "python", "arguments": {"code": "while True: pass"}}</tool_call>'
                       * rng.choice((3, 8))),) if rng.random() < 0.02 else ()))()
    return str(rng.randrange(20)) + ", " + ", ".join(rng.choice(("amber", "birch", "x")) for _ in range(5))


@dataclass
class FuzzReport:
    actions: int = 0
    crashes: list[str] = field(default_factory=list)
    slow_steps: list[str] = field(default_factory=list)
    episodes: int = 0
    lost_trajectories: int = 0
    invalid_observations: int = 0
    invalid: list[str] = field(default_factory=list)


def fuzz_env(make_env: Callable[[], Any], rng: random.Random, actions: int, slow_s: float = 5.0,
             report: FuzzReport | None = None, label: str = "") -> FuzzReport:
    """Step one env with ``actions`` hostile actions (steps before reset and after the end
    included); a crash is any exception, a slow step one over ``slow_s``."""
    from rubricgym.spaces import ChatSpace

    report = report or FuzzReport()
    env = make_env()
    space = ChatSpace()
    base = env.unwrapped
    ended = True
    for _ in range(actions):
        report.actions += 1
        start = time.perf_counter()
        try:
            if ended and rng.random() < 0.8:
                env.reset(seed=rng.randrange(10**6))
                ended = False
                continue
            obs, reward, terminated, truncated, info = env.step(hostile_action(rng, getattr(base, "max_action_chars", 200_000)))
            if not space.contains(obs) or not isinstance(reward, float) or not math.isfinite(reward):
                report.invalid_observations += 1
                report.invalid.append(f"{label}: reward {reward!r}, observation in space: {space.contains(obs)}")
            if (terminated or truncated) and not ended:
                report.episodes += 1
                report.lost_trajectories += info.get("episode") is None and not info.get("episode_ended")
            ended = ended or terminated or truncated
        except Exception as err:  # what this harness exists to count
            report.crashes.append(f"{label}: {type(err).__name__}: {str(err)[:200]}")
            ended = True
        elapsed = time.perf_counter() - start
        if elapsed > slow_s:
            report.slow_steps.append(f"{label}: {elapsed:.1f} s")
    env.close()
    return report


class FaultyJudge:
    """A judge backend that answers with one fault mode per call, in a fixed rotation."""

    name = "faulty"
    MODES = ("timeout", "5xx", "429", "garbage", "deep", "wrong_ids", "wrong_count", "nan", "out_of_range", "huge",
             "huge_int", "ok")

    def __init__(self, modes: tuple[str, ...] = MODES):
        self.modes = modes
        self.calls = 0
        self.faults = 0

    async def complete(self, messages, response_format, timeout_s, **params):
        from rubricgym.llm import Completion

        mode = self.modes[self.calls % len(self.modes)]
        self.faults += mode != "ok"
        self.calls += 1
        prompt = messages[1]["content"] if len(messages) > 1 else ""
        ids = re.findall(r'<trajectory id="(t\d+)">', prompt)
        scores = [{"trajectory_id": i, "explanation": "x", "score": 0.5} for i in ids]
        items = len(re.findall(r"^\d+\. ", prompt.split("Rubric items:")[-1], re.M))
        if "satisfied" in messages[0]["content"]:  # a rubric verifier's request
            scores = None
        if mode == "timeout":
            await asyncio.sleep(timeout_s * 20)
        if mode == "5xx":
            raise ConnectionError("502 Bad Gateway")
        if mode == "429":
            raise RuntimeError("429 Too Many Requests")
        text = {"garbage": "I think they are all fine!", "deep": "[" * 5000 + "]" * 5000,
                "wrong_ids": json.dumps({"scores": [{**s, "trajectory_id": "t99"} for s in scores or []]}),
                "wrong_count": json.dumps({"scores": (scores or [])[:1]}),
                "nan": json.dumps({"scores": scores}).replace("0.5", "NaN"),
                "out_of_range": json.dumps({"scores": scores}).replace("0.5", "17"),
                "huge": json.dumps({"scores": scores}) + " " + "x" * 2_000_000,
                "huge_int": (json.dumps({"scores": scores}) if scores is not None else
                             json.dumps({"satisfied": ["yes"] * items})).replace('0.5', "9" * 5000).replace('"yes"', "9" * 5000),
                "ok": json.dumps({"scores": scores})}[mode]
        if scores is None and mode == "ok":
            text = json.dumps({"satisfied": ["yes"] * items})
        return Completion(text=text, prompt_tokens=10, completion_tokens=10, model=self.name)



# ---------------------------------------------------------------------------------------------
# Sandbox escape attempts: (name, code, text whose presence in the output proves an escape).
# The audit hook reads module globals: rebinding them switches it off, so every attempt runs twice,
# plain and after that.

DISARM = "_denied = (); _cwd = '/'; _ro = ('/',)\n"

_PROJECT_README = str(CHECKOUT_ROOT / "README.md")
# the README's marker is a line of its content, never part of its path (a checkout is often in a folder
# named rubricgym, which the sandbox's own "no such file" message may echo)
_SECRETS = {"/etc/shadow": "root:", "/etc/passwd": "root:x:0", "/root/.bashrc": "PS1", "/proc/1/environ": "HOME=/root",
            _PROJECT_README: "<!-- test-command -->"}
ESCAPES: list[tuple[str, str, str]] = []
for _path, _marker in _SECRETS.items():
    if _marker:
        ESCAPES.append((f"read {_path}", f"print(open({_path!r}).read())", _marker))
        ESCAPES.append((f"shell cat {_path}", f"import subprocess\nprint(subprocess.run(['/bin/sh', '-c', 'cat {_path}'], "
                        f"capture_output=True, text=True).stdout)", _marker))
ESCAPES += [
    ("list /", "import os\nprint(sorted(os.listdir('/')))", "'etc'"),
    ("list /root", "import os\nprint(os.listdir('/root'))", ".cache"),
    ("list /tmp", "import os\nprint(os.listdir('/tmp'))", "rubricgym"),
    ("builtins.any", "import builtins\nbuiltins.any = lambda *a: True\nprint(open('/etc/passwd').read())", "root:x:0"),
    ("realpath patch", "import os.path\nos.path.realpath = lambda p: '/work/x'\nprint(open('/etc/passwd').read())", "root:x:0"),
    ("hook code rewritten via gc", "import gc\nfor o in gc.get_objects():\n    if getattr(o, '__name__', '') == '_hook' and "
                                   "hasattr(o, '__code__'):\n        o.__code__ = (lambda event, args: None).__code__\n"
                                   "print(open('/etc/passwd').read())", "root:x:0"),
    ("dir_fd open", "import os\nfd = os.open('passwd', os.O_RDONLY, dir_fd=os.open('/etc', os.O_RDONLY))\n"
                    "print(os.read(fd, 4096).decode())", "root:x:0"),
    ("posixsubprocess", "import _posixsubprocess, os\nprint('HOST' if os.path.exists('/etc/shadow') else 'no')", "HOST"),
    ("network tcp", "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)\nprint('CONNECTED')", "CONNECTED"),
    ("network udp", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x', ('8.8.8.8', 53))"
                    "\nprint('SENT')", "SENT"),
    ("host loopback", "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=2)\nprint('CONNECTED')",
     "CONNECTED"),
    ("environment", "import os\nprint(dict(os.environ))", "'HOME': '/root'"),
    ("write /tmp", "open('/tmp/rubricgym-escape', 'w').write('x')\nprint('WROTE')", "WROTE"),
    ("write the project", f"open({str(Path(_PROJECT_README).with_name('escape.txt'))!r}, 'w').write('x')\nprint('WROTE')",
     "WROTE"),
    ("sqlite outside", "import sqlite3\nsqlite3.connect('/tmp/escape.db').execute('create table t(x)')\nprint('WROTE')",
     "WROTE"),
    ("mkfifo outside", "import os\nos.mkfifo('/tmp/escape-fifo')\nprint('WROTE')", "WROTE"),
    ("host pids", "import os\nprint(max(int(p) for p in os.listdir('/proc') if p.isdigit()) > 100 and 'MANY')", "MANY"),
    ("ctypes", "import ctypes\nlibc = ctypes.CDLL(None)\nprint('UID', libc.getuid())", "UID 0"),
    ("setuid", "import os\nos.setuid(0)\nprint('ROOT', os.getuid())", "ROOT 0"),
    ("mount", "import ctypes\nprint('MOUNTED' if ctypes.CDLL(None).mount(b'none', b'/mnt', b'tmpfs', 0, None) == 0 "
              "else 'no')", "MOUNTED"),
]
# Round three: memory through the file system, and the kernel surface a seccomp filter closes. A
# syscall helper returns its result (>= 0: it worked); ctypes is the audit hook's to refuse, so
# these reach the kernel in their disarmed copies.
_SYSCALL = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nx86 = os.uname().machine == 'x86_64'\n"


def _syscall_attempt(name: str, x86: int, arm: int, args: str, marker: str) -> tuple[str, str, str]:
    return (name, _SYSCALL + f"r = libc.syscall({x86} if x86 else {arm}, {args})\nprint('{marker}' if r >= 0 else "
                             f"'refused', os.strerror(ctypes.get_errno()))", marker)


_FILL = ("import os\nwritten = 0\nfor i in range(400):\n    try:\n        with open(f'{folder}/fill{i}', 'wb') as f:\n"
         "            f.write(b'x' * (2**20 - 1))\n        written += 2**20\n    except OSError:\n        break\n"
         "print('FILLED' if written > 64 * 2**20 else f'stopped at {written >> 20} MiB')")
ESCAPES += [
    (f"fill {folder} with 400 MiB", _FILL.replace("{folder}", folder), "FILLED") for folder in ("/work", "/", "/dev/shm",
                                                                                            "/dev", "/tmp")
] + [
    ("a million inodes", "import os\nn = 0\ntry:\n    for n in range(200_000):\n        os.mkdir(f'/work/d{n}')\n"
                         "except OSError:\n    pass\nprint('INODES' if n > 50_000 else f'stopped at {n}')", "INODES"),
    ("unshare a user namespace", _SYSCALL + "r = libc.unshare(0x10000000)\nprint('UNSHARED' if r == 0 else 'refused')",
     "UNSHARED"),
    ("unshare a mount namespace", _SYSCALL + "r = libc.unshare(0x00020000)\nprint('UNSHARED' if r == 0 else 'refused')",
     "UNSHARED"),
    ("clone with CLONE_NEWUSER", _SYSCALL + "r = libc.syscall(56 if x86 else 220, 0x10000000 | 17, 0, 0, 0, 0)\n"
                                            "print('CLONED' if r >= 0 else 'refused')\nif r == 0: os._exit(0)", "CLONED"),
    _syscall_attempt("io_uring_setup", 425, 425, "8, ctypes.create_string_buffer(120)", "IO_URING"),
    _syscall_attempt("bpf", 321, 280, "0, ctypes.create_string_buffer(128), 128", "BPF"),
    _syscall_attempt("ptrace traceme", 101, 117, "0, 0, 0, 0", "PTRACED"),
    _syscall_attempt("keyctl", 250, 219, "0, -3, 0, 0, 0", "KEYCTL"),
    _syscall_attempt("add_key", 248, 217, "b'user', b'k', b'v', 1, -3", "KEYADDED"),
    _syscall_attempt("setns", 308, 268, "0, 0", "SETNS"),
    _syscall_attempt("fsopen tmpfs", 430, 430, "b'tmpfs', 0", "FSOPEN"),
    _syscall_attempt("userfaultfd", 323, 282, "0", "USERFAULTFD"),
    _syscall_attempt("perf_event_open", 298, 241, "ctypes.create_string_buffer(128), 0, -1, -1, 0", "PERF"),
    ("python os.unshare", "import os\nos.unshare(os.CLONE_NEWUSER) if hasattr(os, 'unshare') else None\n"
                          "print('UNSHARED' if hasattr(os, 'unshare') else 'absent')", "UNSHARED"),
]
ESCAPES = [(name, code, marker) for name, code, marker in ESCAPES] + [
    (f"{name} (hook disarmed)", DISARM + code, marker) for name, code, marker in ESCAPES]


def try_escapes(run: Callable[[str], str], attempts: list[tuple[str, str, str]] | None = None) -> list[str]:
    """The names of the escape attempts whose marker showed up in the output (should be none)."""
    return [name for name, code, marker in (ESCAPES if attempts is None else attempts) if marker in run(code)]
