import copy
import json

import gymnasium as gym
import pytest

import rubricgym
from rubricgym.app.cli import main as cli_main
from rubricgym.records import Group, Trajectory, TrajectoryRecorder, Transition
from rubricgym.spaces import AssistantReplySpace, ChatSpace, UnicodeText


def test_unicode_text_accepts_any_text_and_empty():
    space = UnicodeText(max_length=50)
    assert space.contains("")
    assert space.contains("∫ x² dx — 中文 🙂 \\boxed{½}")
    assert not space.contains("x" * 51)
    assert not space.contains(b"bytes")
    sample = space.sample()
    assert isinstance(sample, str) and space.contains(sample)


def test_chat_space_contains_and_equality():
    space = ChatSpace()
    good = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "42"},
    ]
    assert space.contains(good)
    assert not space.contains([{"role": "wizard", "content": "x"}])
    assert not space.contains([{"role": "user", "content": 3}])
    assert not space.contains("not a list")
    assert space == ChatSpace() and space != ChatSpace(max_messages=3)
    assert space.contains(space.sample())


def test_assistant_reply_space():
    space = AssistantReplySpace(max_length=10)
    assert space.contains("short")
    assert not space.contains("x" * 11)
    assert space.contains({"role": "assistant", "content": "hi"})
    assert not space.contains({"role": "user", "content": "hi"})
    assert not space.contains(3)


def test_records_json_round_trip():
    import numpy as np

    transition = Transition(obs=[{"role": "user", "content": "2+2?"}], action="\\boxed{4}", reward=1.0,
                            next_obs=[{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "\\boxed{4}"}],
                            terminated=True, truncated=False, info={"score": np.float32(0.5), "ids": np.arange(2)})
    traj = Trajectory(task_id="t1", messages=transition.next_obs, transitions=[transition], reward=1.0,
                      reward_components={"outcome": 1.0, "ruler": 0.8}, metrics={"len": 3}, metadata={"k": (1, 2)})
    group = Group(task_id="t1", trajectories=[traj, traj.model_copy(update={"id": "other"})], metadata={"judge": "x"})
    restored = Group.model_validate_json(group.model_dump_json())
    assert restored == group
    assert restored.trajectories[0].transitions[0].info == {"score": 0.5, "ids": [0, 1]}
    assert json.loads(traj.model_dump_json())["reward_components"] == {"outcome": 1.0, "ruler": 0.8}


def test_trajectory_recorder_keeps_components():
    recorder = TrajectoryRecorder()
    start = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]
    recorder.start(start, {"task_id": 7, "answer": "4"})
    first = start + [{"role": "assistant", "content": "a"}]
    recorder.add("a", 0.0, first, False, False, {"reward_components": {}})
    recorder.add("b", -1.0, first + [{"role": "assistant", "content": "b"}], True, False, {"reward_components": {"outcome": -1.0}})
    traj = recorder.trajectory
    assert traj.task_id == "7" and traj.reward == -1.0 and traj.terminated
    assert traj.reward_components == {"outcome": -1.0}
    assert len(traj.transitions) == 2 and traj.metadata["answer"] == "4"
    assert traj.system_prompt == "sys" and traj.messages[-1]["content"] == "b"
    assert traj.transitions[1].obs == first


def test_registered_ids_and_namespace_import():
    assert "Math-v0" in gym.registry
    env = gym.make("rubricgym:Math-v0")
    assert env.unwrapped.__class__.__name__ == "MathEnv"
    assert {e.id for e in rubricgym.ENVS.values()} <= set(gym.registry)


def test_cli_envs_lists_ids(capsys):
    assert cli_main(["envs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Math-v0 ")
    assert all(len(line.split(None, 1)) == 2 for line in out.strip().splitlines())


def test_cli_baseline_runs(capsys):
    assert cli_main(["baseline", "--policy", "calculator", "--episodes", "16", "--levels", "1,3"]) == 0
    out = capsys.readouterr().out
    assert "calculator   accuracy=1.000 over 16 episodes" in out


def test_estimate_baseline_is_exact_on_single_digits_only():
    from rubricgym.envs.math.scripted import estimate_policy

    ask = lambda problem: estimate_policy([{"role": "user", "content": problem}])  # noqa: E731
    assert ask("What is 7 * 8?") == "Roughly \\boxed{56}." and ask("What is 47 + 38?") == "Roughly \\boxed{90}."
    assert ask("Solve for x: 3x + 1 = 7.") == "\\boxed{0}"


def test_optional_dependency_skips_plainly_and_fails_under_ci(monkeypatch):
    from conftest import require

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install 'rubricgym\[nope\]'"):
        require("no_such_module_for_rubricgym", "nope")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must install it"):
        require("no_such_module_for_rubricgym", "nope")
    assert require("json", "none").dumps([1]) == "[1]"


def test_chat_shared_memory_round_trip_and_overflow_is_a_clear_error():
    from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

    from rubricgym.spaces import ChatSpace

    space = ChatSpace(shared_memory_bytes=200)
    memory = create_shared_memory(space, n=2)
    live = read_from_shared_memory(space, memory, n=2)
    chat = [{"role": "user", "content": "Ünïcode → 中文 🙂"}]
    write_to_shared_memory(space, 1, chat, memory)
    assert live[1] == chat and live[0] == [] and copy.deepcopy(live) == ([], chat)
    with pytest.raises(ValueError, match="shared_memory_bytes=200"):
        write_to_shared_memory(space, 0, [{"role": "user", "content": "x" * 300}], memory)
