import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.llm import extract_json
from rubricgym.records import Group, Trajectory
from rubricgym.judges import combine_reward, rescore_group
from rubricgym.judges.ruler import RulerConfig, RulerScorer, ruler_score_sync
from rubricgym.records import EpisodeResult

from judges import gold, reply_scores, scripted_judge, trajectory_blocks

SYSTEM = {"role": "system", "content": "You are a support agent. Answer only from the context. " + "policy " * 50}
USER = {"role": "user", "content": "What is the refund policy?"}


def traj(quality: float, extra: str = "") -> list[dict]:
    return [SYSTEM, USER, {"role": "assistant", "content": f"answer {extra} quality={quality}"}]


def test_scores_follow_ids_under_shuffled_permutations():
    judge, backend = scripted_judge()
    group = [traj(0.9, "a"), traj(0.1, "b"), traj(0.6, "c"), traj(0.3, "d")]
    result = ruler_score_sync(group, judge, RulerConfig(permutations=3, shuffle=True, seed=4))
    assert result.scores == pytest.approx([0.9, 0.1, 0.6, 0.3])
    assert result.judge_calls == 3 and not result.failed
    orders = [[tid for tid, _ in trajectory_blocks(r)] for r in backend.requests]
    assert len({tuple(o) for o in orders}) == 3  # three different presentation orders
    assert result.explanations[0].startswith("judged")


def test_out_of_range_scores_are_clamped():
    judge, _ = scripted_judge(lambda m, i: reply_scores(m, scorer=lambda body: 7.0 if "big" in body else -2.0))
    result = ruler_score_sync([traj(1, "big"), traj(1, "small")], judge)
    assert result.scores == [1.0, 0.0] and result.clamped == 2


def test_wrapped_json_is_recovered_without_a_retry():
    judge, backend = scripted_judge(lambda m, i: "Sure! Here are the scores:\n```json\n" + reply_scores(m) + "\n```\nThanks.")
    result = ruler_score_sync([traj(0.2, "x"), traj(0.8, "y")], judge)
    assert result.scores == pytest.approx([0.2, 0.8]) and len(backend.requests) == 1


def test_truncated_json_is_retried_with_the_problem_stated():
    def script(messages, i):
        full = reply_scores(messages)
        return full[: len(full) // 2] if i == 0 else full

    judge, backend = scripted_judge(script)
    result = ruler_score_sync([traj(0.2, "x"), traj(0.8, "y"), traj(0.5, "z")], judge)
    assert result.scores == pytest.approx([0.2, 0.8, 0.5])
    assert len(backend.requests) == 2 and "not valid" in backend.requests[1][-1]["content"]


def test_wrong_number_of_scores_is_retried():
    def script(messages, i):
        data = json.loads(reply_scores(messages))
        if i == 0:
            data["scores"] = data["scores"][:1]
        if i == 1:
            data["scores"].append(dict(data["scores"][0]))  # a repeated id
        return json.dumps(data)

    judge, backend = scripted_judge(script)
    result = ruler_score_sync([traj(0.3, "x"), traj(0.7, "y")], judge)
    assert result.scores == pytest.approx([0.3, 0.7]) and len(backend.requests) == 3
    assert "missing ['t" in backend.requests[1][-1]["content"] and "repeated ['t" in backend.requests[2][-1]["content"]


def test_failing_judge_falls_back_and_keeps_every_trajectory():
    judge, backend = scripted_judge(lambda m, i: ConnectionError("server down"), max_retries=2)
    group = Group(task_id="t", trajectories=[
        Trajectory(messages=traj(0.5, str(i)), reward=float(i % 2), reward_components={"outcome": float(i % 2)},
                   episode=EpisodeResult(task_id="t", specification="s", task="q", reward=float(i % 2)))
        for i in range(4)])
    with pytest.warns(UserWarning, match="RULER judge failed, the env reward is kept.*server down"):
        asyncio.run(rescore_group(group, RulerScorer(judge, combine="replace")))
    assert len(group.trajectories) == 4 and group.metadata["ruler_failed"]
    assert "ConnectionError" in group.metadata["ruler_error"]
    assert [t.reward for t in group.trajectories] == [0.0, 1.0, 0.0, 1.0]  # env reward kept
    assert all("ruler" not in t.reward_components for t in group.trajectories)
    assert len(backend.requests) == 3  # first try + 2 retries
    garbage, _ = scripted_judge(lambda m, i: "I refuse to output JSON")
    result = ruler_score_sync([traj(0.1), traj(0.2)], garbage)
    assert result.failed and result.scores == [None, None]


def test_second_identical_request_is_a_cache_hit(tmp_path):
    judge, backend = scripted_judge(cache_dir=str(tmp_path / "cache"))
    group = [traj(0.4, "x"), traj(0.6, "y")]
    first = ruler_score_sync(group, judge)
    second = ruler_score_sync(group, judge)
    assert first.scores == second.scores and len(backend.requests) == 1
    assert second.judge_calls == 0 and second.cache_hits == 1 and judge.usage.cache_hits == 1
    # a fresh client on the same folder (a new process) is served from disk too
    again, backend2 = scripted_judge(cache_dir=str(tmp_path / "cache"))
    assert ruler_score_sync(group, again).scores == first.scores and backend2.requests == []


def test_identical_trajectories_judged_once_and_prefix_sent_once():
    judge, backend = scripted_judge()
    group = [traj(0.9, "a"), traj(0.2, "b"), traj(0.9, "a"), traj(0.9, "a")]
    result = ruler_score_sync(group, judge)
    assert result.unique == 2 and result.scores == pytest.approx([0.9, 0.2, 0.9, 0.9])
    prompt = backend.requests[0][-1]["content"]
    assert prompt.count("Answer only from the context") == 1 and prompt.count("<trajectory id=") == 2
    naive, naive_backend = scripted_judge()
    ruler_score_sync(group, naive, RulerConfig(share_prefix=False, dedup=False))
    naive_prompt = naive_backend.requests[0][-1]["content"]
    assert naive_prompt.count("Answer only from the context") == 4
    assert judge.usage.prompt_tokens < 0.6 * naive.usage.prompt_tokens


def test_custom_rubric_and_tool_schemas_reach_the_judge():
    judge, backend = scripted_judge()
    tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {}}}]
    ruler_score_sync([traj(0.1), traj(0.2)], judge, RulerConfig(rubric="Prefer answers that cite article ids."), tools)
    system, user = backend.requests[0]
    assert "Prefer answers that cite article ids." in system["content"]
    assert "<agent_tools>" in user["content"] and "lookup_order" in user["content"]


def test_retries_with_backoff_and_timeouts():
    judge, backend = scripted_judge(lambda m, i: TimeoutError("slow") if i < 2 else reply_scores(m))
    assert ruler_score_sync([traj(0.3), traj(0.4, "b")], judge).scores == pytest.approx([0.3, 0.4])
    assert len(backend.requests) == 3
    slow, slow_backend = scripted_judge(timeout_s=0.05, max_retries=1)
    slow_backend.delay_s = 3.0  # ignores its timeout: the client's safety net (timeout + 1 s) stops it
    result = ruler_score_sync([traj(0.3), traj(0.4, "b")], slow)
    assert result.failed and "timed out" in result.error and len(slow_backend.requests) == 2


def test_concurrency_limit_across_groups():
    judge, backend = scripted_judge(max_concurrency=2)
    backend.delay_s = 0.05

    async def many():
        from rubricgym.judges.ruler import ruler_score
        return await asyncio.gather(*(ruler_score([traj(0.1, str(g)), traj(0.2, str(g))], judge) for g in range(6)))

    results = asyncio.run(many())
    assert all(not r.failed for r in results) and backend.max_in_flight == 2


def test_token_and_cost_accounting(tmp_path):
    judge, backend = scripted_judge(cache_dir=str(tmp_path / "cache"))
    backend.cost_per_call = 0.0025
    result = ruler_score_sync([traj(0.1), traj(0.2, "b")], judge)
    prompt_words = sum(len(str(m["content"]).split()) for m in backend.requests[0])
    assert judge.usage.calls == 1 and judge.usage.prompt_tokens == result.prompt_tokens == prompt_words
    assert judge.usage.completion_tokens == result.completion_tokens > 0
    assert judge.usage.cost_usd == pytest.approx(0.0025)
    ruler_score_sync([traj(0.1), traj(0.2, "b")], judge)  # served from the cache: no call, no cost
    assert judge.usage.calls == 1 and judge.usage.cache_hits == 1 and judge.usage.cost_usd == pytest.approx(0.0025)
    ruler_score_sync([traj(0.3), traj(0.4, "c")], judge, RulerConfig(permutations=2))  # two orders: two paid calls
    assert judge.usage.calls == 3 and judge.usage.cost_usd == pytest.approx(0.0075)


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json("text {'a': 1,} more") == {"a": 1}
    with pytest.raises(ValueError):
        extract_json("no json here")


def test_combine_policies():
    assert combine_reward(-1.0, {"ruler": 0.5}, "sum") == -0.5
    with pytest.raises(ValueError):
        combine_reward(1.0, {"ruler": 0.5}, "average")
    with pytest.raises(ValueError, match="unknown components"):
        combine_reward(1.0, {"ruler": 0.5}, {"rulr": 1.0})


def math_quality_scorer(body: str) -> float:
    return 0.9 if "right" in body else 0.2


def test_math_ruler_group_env_writes_components_and_combines():
    judge, backend = scripted_judge(lambda m, i: reply_scores(m, scorer=math_quality_scorer))
    envs = gym.make_vec("MathRuler-v0", num_envs=4, group_size=2, judge=judge)
    _, info = envs.reset(seed=0)
    answers = gold(info["task_id"])
    actions = [f"right \\boxed{{{answers[0]}}}", "wrong \\boxed{-1}", f"right \\boxed{{{answers[2]}}}", "wrong \\boxed{-1}"]
    _, rewards, terminated, _, info = envs.step(actions)
    assert terminated.all() and len(backend.requests) == 2  # one judge call per group
    assert list(rewards) == pytest.approx([1.9, -0.8, 1.9, -0.8])
    components = info["reward_components"]
    assert list(components["ruler"]) == pytest.approx([0.9, 0.2, 0.9, 0.2]) and components["_ruler"].all()
    assert list(components["outcome"]) == [1.0, -1.0, 1.0, -1.0] and list(components["env"]) == [1.0, -1.0, 1.0, -1.0]
    assert all(e == "judged t1" or e == "judged t2" for e in info["ruler_explanation"])
    assert not info["ruler_failed"].any()
    assert info["trajectory"][0].reward == pytest.approx(1.9)
    assert info["trajectory"][1].reward_components == pytest.approx({"outcome": -1.0, "env": -1.0, "ruler": 0.2})


def test_math_ruler_group_env_fallback_keeps_env_reward():
    judge, _ = scripted_judge(lambda m, i: RuntimeError("judge down"), max_retries=0)
    envs = gym.make_vec("MathRuler-v0", num_envs=2, group_size=2, judge=judge, combine="replace")
    _, info = envs.reset(seed=0)
    with pytest.warns(UserWarning, match="RULER judge failed.*judge down"):
        _, rewards, _, _, info = envs.step([f"\\boxed{{{gold(info['task_id'])[0]}}}", "\\boxed{-1}"])
    assert list(rewards) == [1.0, -1.0] and info["ruler_failed"].all()
    assert np.isnan(info["ruler_score"]).all() and "ruler" not in info["reward_components"]
    assert list(info["reward_components"]["outcome"]) == [1.0, -1.0]


def test_math_ruler_single_env_check_env_and_relative_history():
    judge, backend = scripted_judge(lambda m, i: reply_scores(m, scorer=math_quality_scorer))
    env = gym.make("MathRuler-v0", judge=judge)
    check_env(env.unwrapped)
    check_env(env)
    env = gym.make("MathRuler-v0", judge=judge, history_size=2)
    _, info = env.reset(options={"task_id": "gen-L1-test-9"})
    _, reward, *_, info = env.step(f"right \\boxed{{{gold(info['task_id'])}}}")
    assert info["ruler_relative_to"] == 0 and reward == pytest.approx(1.9)
    env.reset(options={"task_id": "gen-L1-test-9"})
    _, reward, *_, info = env.step("wrong \\boxed{-7}")
    assert info["ruler_relative_to"] == 1 and reward == pytest.approx(-0.8)
    assert len(trajectory_blocks(backend.requests[-1])) == 2
    assert info["reward_components"] == pytest.approx({"outcome": -1.0, "env": -1.0, "ruler": 0.2})


def test_function_reward_wrapper_and_math_function_env():
    from rubricgym.wrappers import FunctionReward

    env = gym.make("MathFunction-v0")
    check_env(env.unwrapped)
    _, info = env.reset(options={"task_id": "gen-L1-test-2"})
    _, reward, *_, info = env.step(f"\\boxed{{{gold(info['task_id'])}}}")
    assert reward == pytest.approx(1.2) and info["reward_components"]["shaped"] == pytest.approx(0.2)
    env.reset(options={"task_id": "gen-L1-test-2"})
    _, reward, *_, info = env.step("x" * 400 + " 12345")
    assert info["reward_components"]["shaped"] == pytest.approx(-0.2 * 2.06, abs=0.05) and reward < -1.0

    def broken(messages, info):
        raise KeyError("oops")

    wrapped = FunctionReward(gym.make("Math-v0").unwrapped, broken, name="mine")
    _, info = wrapped.reset(options={"task_id": "gen-L1-test-2"})
    _, reward, *_, info = wrapped.step(f"\\boxed{{{gold(info['task_id'])}}}")
    assert reward == 1.0 and "KeyError" in info["mine_error"] and "mine" not in info["reward_components"]
    envs = gym.make_vec("MathFunction-v0", num_envs=2, group_size=2)
    _, info = envs.reset(seed=0)
    _, rewards, terminated, _, info = envs.step([f"\\boxed{{{gold(info['task_id'])[0]}}}"] * 2)
    assert list(rewards) == pytest.approx([1.2, 1.2]) and terminated.all()


def test_a_failing_judge_warns_once_per_cause_and_says_why_in_info():
    import warnings as warnings_module

    judge, _ = scripted_judge(lambda m, i: ConnectionError("connection refused"), max_retries=0)
    env = gym.make("MathRuler-v0", judge=judge, levels=(1,))
    with pytest.warns(UserWarning, match="RULER judge failed, the env reward is kept"):
        env.reset(seed=0)
        *_, info = env.step("\\boxed{1}")
    assert info["ruler_failed"] and "ConnectionError" in info["ruler_error"]
    with warnings_module.catch_warnings():
        warnings_module.simplefilter("error")  # the same cause again: no second warning
        env.reset(seed=1)
        *_, info = env.step("\\boxed{2}")
    assert info["ruler_failed"] and "ruler" not in info["reward_components"]
