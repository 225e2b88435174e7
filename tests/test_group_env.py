import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.records import Trajectory
from rubricgym.wrappers import GroupVectorEnv
from judges import gold

CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'


def test_groups_share_tasks_and_terminate_together_with_waiting_members():
    envs = gym.make_vec("Math-v0", num_envs=6, group_size=3, tools=["calculator"], max_turns=4, levels=(1,))
    assert isinstance(envs, GroupVectorEnv) and envs.num_groups == 2
    obs, info = envs.reset(seed=1)
    tasks = info["task_id"]
    assert tasks[0] == tasks[1] == tasks[2] and tasks[3] == tasks[4] == tasks[5]
    assert all(o[1] == obs[0][1] for o in obs[:3])
    answers = gold(info["task_id"])
    # episode lengths per member: group 0 -> 1, 2, 3 turns; group 1 -> 2, 2, 1 turns
    plans = [
        [f"\\boxed{{{answers[0]}}}"],
        [CALC, "\\boxed{-5}"],
        [CALC, CALC, f"\\boxed{{{answers[2]}}}"],
        [CALC, f"\\boxed{{{answers[3]}}}"],
        [CALC, "no answer"],
        [f"\\boxed{{{answers[5]}}}"],
    ]
    history = []
    for t in range(3):
        actions = [plan[t] if t < len(plan) else "IGNORED \\boxed{999}" for plan in plans]
        obs, rewards, terminated, truncated, info = envs.step(actions)
        history.append((rewards.copy(), terminated.copy(), truncated.copy(), info["active"].copy()))
        assert list(info["task_id"][:3]) == [tasks[0]] * 3

    # step 1: members 0 and 5 end but wait; nobody terminates, no reward yet
    rewards, terminated, truncated, active = history[0]
    assert not terminated.any() and not truncated.any() and (rewards == 0).all() and active.all()
    # step 2: group 1 (members 3, 4, 5) terminates together; member 5 was waiting (inactive)
    rewards, terminated, truncated, active = history[1]
    assert list(terminated) == [False, False, False, True, True, True]
    assert list(rewards[3:]) == [1.0, -1.0, 1.0]
    assert list(active) == [False, True, True, True, True, False]
    # step 3: group 0 terminates together; delayed rewards land on the terminal step
    rewards, terminated, truncated, active = history[2]
    assert list(terminated[:3]) == [True, True, True]
    assert list(rewards[:3]) == [1.0, -1.0, 1.0]
    assert list(active[:3]) == [False, False, True]
    # the waiting members' frozen observations are their own final ones
    assert obs[0][-1]["content"] == plans[0][0]
    # each member's trajectory is delivered with the terminal step
    trajectories = info["trajectory"][:3]
    assert all(isinstance(t, Trajectory) for t in trajectories)
    assert [len(t.transitions) for t in trajectories] == [1, 2, 3]
    assert [t.reward for t in trajectories] == [1.0, -1.0, 1.0]
    assert {t.task_id for t in trajectories} == {tasks[0]}
    group = envs.group_trajectories(0)
    assert group.task_id == tasks[0] and len(group) == 3


def test_next_step_autoreset_gives_a_new_shared_task():
    envs = gym.make_vec("Math-v0", num_envs=4, group_size=2)
    _, info = envs.reset(seed=0)
    first_tasks = list(info["task_id"])
    _, _, terminated, _, _ = envs.step(["\\boxed{1}"] * 4)
    assert terminated.all()
    obs, rewards, terminated, truncated, info = envs.step(["ignored"] * 4)
    assert (rewards == 0).all() and not terminated.any()
    assert info["task_id"][0] == info["task_id"][1] and info["task_id"][2] == info["task_id"][3]
    assert list(info["task_id"]) != first_tasks
    assert all(len(o) == 2 for o in obs)


def test_reset_options_pick_tasks_per_group_and_validate():
    envs = gym.make_vec("Math-v0", num_envs=4, group_size=2)
    _, info = envs.reset(options={"task_ids": ["gen-L1-test-1", "gen-L6-test-2"]})
    assert list(info["task_id"]) == ["gen-L1-test-1"] * 2 + ["gen-L6-test-2"] * 2
    with pytest.raises(ValueError, match="one id per group"):
        envs.reset(options={"task_ids": ["gen-L1-test-1"]})
    with pytest.raises(ValueError, match="multiple of group_size"):
        gym.make_vec("Math-v0", num_envs=5, group_size=2)
    with pytest.raises(ValueError, match="expected 4 actions"):
        envs.step(["x"])


def test_seeded_group_reset_is_reproducible():
    a = gym.make_vec("Math-v0", num_envs=4, group_size=2)
    b = gym.make_vec("Math-v0", num_envs=4, group_size=2)
    assert list(a.reset(seed=7)[1]["task_id"]) == list(b.reset(seed=7)[1]["task_id"])


def test_group_env_spaces_batch_chat_observations():
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    obs, _ = envs.reset(seed=0)
    assert envs.observation_space.contains(obs)
    assert envs.single_action_space.contains("any text ∑")


@pytest.mark.parametrize("env_id", ["ToolUse-v0", "FunctionCall-v0", "RagSupport-v0"])
def test_same_seed_and_actions_give_byte_identical_group_records(env_id, shared_data):
    """Trajectory ids and tool-call ids come from the seed and the content, never from uuid4."""

    def play() -> str:
        envs = gym.make_vec(env_id, num_envs=2, group_size=2)
        obs, info = envs.reset(seed=11)
        tool = info["tools"][0][0]["function"]["name"] if info.get("tools") is not None else "search"
        call = f'<tool_call>{{"name": "{tool}", "arguments": {{}}}}</tool_call>'
        envs.step([call, "I cannot help with that."])
        record = envs.unwrapped.group_trajectories(0).model_dump_json()
        envs.close()
        return record

    first, second = play(), play()
    assert first == second
    assert '"id":"' in first


def test_trajectory_ids_follow_the_reset_seed():
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    envs.reset(seed=3)
    seeded = [t.id for t in envs.unwrapped.group_trajectories(0).trajectories]
    envs.reset(seed=4)
    other = [t.id for t in envs.unwrapped.group_trajectories(0).trajectories]
    envs.reset(seed=3)
    again = [t.id for t in envs.unwrapped.group_trajectories(0).trajectories]
    assert seeded == again and seeded != other and len(set(seeded)) == 2
