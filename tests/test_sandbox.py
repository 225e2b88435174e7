"""The python tool's sandbox is a boundary (bubblewrap), not a Python audit hook: every escape
reported against the audit-hook sandbox, tried here with the hook switched off first."""

from __future__ import annotations

import json
import os
import subprocess
import time

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.testing.hostile import DISARM, ESCAPES, try_escapes
from rubricgym.sandbox import SandboxLimits, run_python

@pytest.mark.parametrize("name,code,marker", ESCAPES, ids=[name for name, _, _ in ESCAPES])
def test_escape_attempts_see_nothing_of_the_host(name, code, marker, bwrap):
    output, _, problem = run_python(code)
    assert marker not in output, output[-1000:]


def test_the_escape_list_would_catch_the_old_sandbox(tmp_path, monkeypatch):
    # the same attempts against the audit-hook guard: many get through, so the markers are live
    # (run only the read-only ones: the writes would land on this machine)
    readers = [(n, c, m) for n, c, m in ESCAPES if "WROTE" not in m]
    escaped = try_escapes(lambda code: run_python(code, SandboxLimits(isolation="audit-hook"))[0], readers)
    assert len(escaped) >= 10 and "read /etc/shadow (hook disarmed)" in escaped


def test_writes_outside_never_reach_the_host(bwrap, tmp_path):
    victim = tmp_path / "other-episode.txt"
    victim.write_text("theirs")
    code = DISARM + f"""
import os, sqlite3
for attempt in (lambda: open({str(victim)!r}, 'w').write('mine'),
                lambda: os.replace('x', {str(victim)!r}),
                lambda: sqlite3.connect({str(tmp_path / 'db.sqlite')!r}).execute('create table t(x)'),
                lambda: os.mkfifo({str(tmp_path / 'fifo')!r}),
                lambda: open('/tmp/rubricgym-evil.txt', 'w').write('x')):
    try:
        open('x', 'w').write('mine')
        attempt()
        print('WROTE')
    except Exception as err:
        print(type(err).__name__)
"""
    output, _, _ = run_python(code)
    assert victim.read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["other-episode.txt"]
    assert not os.path.exists("/tmp/rubricgym-evil.txt")


def test_host_processes_are_invisible_and_unkillable(bwrap):
    host = subprocess.Popen(["sleep", "60"])
    try:
        code = DISARM + f"""
import os, signal
print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
for kill in (lambda: os.kill({host.pid}, signal.SIGKILL),
             lambda: signal.pidfd_send_signal(os.pidfd_open({host.pid}), signal.SIGKILL)):
    try:
        kill()
        print('KILLED')
    except Exception as err:
        print(type(err).__name__)
"""
        output, _, _ = run_python(code)
        assert host.poll() is None, "a host process was killed from the sandbox"
        pids = json.loads(output.splitlines()[0])
        assert host.pid not in pids and max(pids) < 50  # its own PID namespace
    finally:
        host.kill()


def test_fork_bomb_stops_at_the_process_limit(bwrap):
    start = time.perf_counter()
    code = DISARM + "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(30)\n" \
                    "        n += 1\nexcept OSError as err:\n    print('LIMIT', n, type(err).__name__)\n"
    output, _, _ = run_python(code, SandboxLimits(max_processes=8, wall_time_s=10))
    assert "LIMIT" in output and int(output.split()[1]) <= 8 and time.perf_counter() - start < 30


def test_an_output_flood_is_cut_while_it_streams(bwrap):
    start = time.perf_counter()
    output, _, problem = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", SandboxLimits(wall_time_s=20))
    assert len(output) <= 8_000 and "printed over 8,000 bytes" in problem
    assert time.perf_counter() - start < 10  # stopped at the cap, not at the wall-time limit


@pytest.mark.parametrize("code,fragment", [
    ("while True:\n    pass", ("ran longer than", "more CPU time than allowed")),
    ("open('big.bin', 'wb').write(b'0' * (20 * 2**20))", ("File too large", "over the size limit", "No space left")),
    ("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)", ("socket",)),
    ("import subprocess\nsubprocess.run(['ls'])", ("subprocess.Popen is not allowed",)),
])
def test_contained_code_is_a_tool_error_and_the_env_stays_usable(code, fragment, bwrap):
    env = gym.make("Math-v0", tools=["python"], max_turns=3)
    env.reset(options={"task_id": "gen-L4-test-1"})
    call = '<tool_call>' + json.dumps({"name": "python", "arguments": {"code": code}}) + '</tool_call>'
    obs, reward, terminated, truncated, info = env.step(call)
    assert not terminated and obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error:")
    assert any(f in obs[-1]["content"] for f in fragment), obs[-1]["content"][-500:]
    obs, *_ = env.step('<tool_call>' + json.dumps({"name": "python", "arguments": {"code": "print(6 * 7)"}}) + '</tool_call>')
    assert obs[-1]["content"].strip() == "42"


def test_without_bubblewrap_the_tool_refuses_unless_the_weaker_guard_is_chosen(monkeypatch):
    from rubricgym import sandbox

    monkeypatch.setattr(sandbox, "_bwrap_works", {True: "bubblewrap is not installed", False: "bubblewrap is not installed"})
    with pytest.raises(RuntimeError, match="python-audit-hook"):
        gym.make("Math-v0", tools=["python"])
    env = gym.make("Math-v0", tools=["python-audit-hook"], max_turns=2).unwrapped
    env.reset(seed=0)
    obs, *_ = env.step('<tool_call>{"name": "python-audit-hook", "arguments": {"code": "print(2 + 2)"}}</tool_call>')
    assert obs[-1]["content"].strip() == "4"
