"""Hostile inputs reproduced from the reliability issue: each is an error observation, a failed
judgement or a wrong answer, never an exception, and never a slow step."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.chatenv import ChatEnv
from rubricgym.envs.rag.rewards import extract_facts, is_refusal
from rubricgym.envs.tools.bfcl import check_calls, values_equal
from rubricgym.spaces import ChatSpace

#: several times what these take on an idle machine (each is milliseconds there)
SLOW_STEP_S = 5.0
DEEP = "[" * 1000 + "]" * 1000


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


ENVS = [("Math-v0", {"tools": ["calculator"]}), ("Math-v0", {}), ("RagSupport-v0", {"mode": "agentic"}),
        ("ToolUse-v0", {}), ("WordSort-v0", {})]


def timed_step(env, action):
    start = time.process_time()  # CPU time: bounded work is tested, not the machine's load
    result = env.step(action)
    spent = time.process_time() - start
    assert spent < SLOW_STEP_S, f"step used {spent:.1f} s of CPU"
    assert ChatSpace().contains(result[0])
    return result


@pytest.mark.parametrize("env_id,kwargs", ENVS)
@pytest.mark.parametrize("action", [
    "<tool_call>" + DEEP + "</tool_call>",
    {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "calculator", "arguments": DEEP}}]},
    "\\boxed{" * 25_000,
    "<tool_call>" * 18_000,
    "\ud800 \\boxed{1}",
], ids=["deep-json-text", "deep-json-arguments", "boxed-flood", "tag-flood", "lone-surrogate"])
def test_hostile_actions_are_error_observations(env_id, kwargs, action):
    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = timed_step(env, action)
    shown_error = bool(info.get("error")) and obs[-1]["role"] == "user" and obs[-1]["content"].startswith(
        ("Error:", "Tool call error:"))
    wrong_answer = terminated and info.get("correct") is False and info["episode"].correct is False
    # an error the agent is shown (the episode goes on, unrewarded, unless it was the last turn), or a wrong answer
    assert shown_error or wrong_answer, (info.get("error"), obs[-1])
    if not terminated:
        assert reward == 0.0 and shown_error


def test_deeply_nested_arguments_in_a_dict_action_are_refused():
    nested: dict = {}
    inner = nested
    for _ in range(500):
        inner["x"] = {}
        inner = inner["x"]
    env = gym.make("Math-v0", tools=["calculator"]).unwrapped
    env.reset(seed=0)
    action = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "calculator", "arguments": nested}}]}
    obs, _, terminated, _, info = timed_step(env, action)
    assert "nested deeper than" in info["error"] and not terminated


@pytest.mark.parametrize("arguments,fragment", [
    ({"order_id": 10**30, "amount": 5.0, "reason": "x"}, "less than or equal to"),
    ({"order_id": 1, "amount": float("nan"), "reason": "x"}, "finite number"),
    ({"order_id": 1, "amount": 1e-300, "reason": "x"}, "greater than or equal to 0.01"),
    ({"order_id": 1, "amount": float("inf"), "reason": "x"}, "finite number"),
])
def test_tooluse_refuses_overflowing_and_non_finite_numbers(arguments, fragment):
    env = gym.make("ToolUse-v0").unwrapped
    env.reset(seed=0)
    action = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "issue_refund", "arguments": arguments}}]}
    obs, *_ , info = timed_step(env, action)
    assert obs[-1]["role"] == "tool" and fragment in obs[-1]["content"]
    assert env.db.execute("SELECT COUNT(*) FROM refunds WHERE amount <= 0.001").fetchone()[0] == 0


def test_rag_answer_with_a_huge_number_is_fast():
    env = gym.make("RagSupport-v0").unwrapped
    env.reset(seed=0)
    timed_step(env, "It costs " + "9" * 3000 + " days. " + "1" * 3000 + ".5 weeks")


@pytest.mark.parametrize("reply,refusal", [
    ("No, water damage is not covered by the warranty [WAR-01].", False),
    ("No. Normal battery wear is not covered [WAR-01].", False),
    ("The policy does not say you can return opened books after 30 days, so no.", False),
    ("I'm sorry, but our knowledge base does not cover this. Please contact help@lumenbooks.example.", True),
    ("I do not have specific information about that.", True),
    ("That is not covered in the knowledge base; please contact support.", True),
    ("There is no information about gift wrapping in the articles.", True),
    ("I can't find anything about that in our help center.", True),
])
def test_refusal_is_about_the_sources_not_a_factual_negative(reply, refusal):
    assert is_refusal(reply) is refusal


def test_builtin_gold_answers_with_factual_negatives_are_correct():
    env = gym.make("RagSupport-v0").unwrapped
    for task_id in ("Q080", "Q081", "Q128"):
        env.reset(options={"task_id": task_id})
        *_, info = env.step(env.task.answer)
        assert info["correct"] and info["reward_components"]["refusal"] == 1.0


def test_numbers_with_thousands_separators_and_section_references():
    assert extract_facts("The limit is $50,000 per year.") == ["number:50000"]
    assert extract_facts("A decimal comma: 4,5 kg") == ["number:4.5"]
    assert extract_facts("See section 4.2 and article 3 for details.") == []


def test_amc_choice_labels_and_negative_percentages():
    from rubricgym.envs.math.grader import answers_match

    assert answers_match("70", "\\textbf{(C) }70") and answers_match("\\textbf{(C) }70", "70")
    assert not answers_match("\\textbf{(C) }70", "\\textbf{(C) }71")
    assert answers_match("-1\\%", "-1") and answers_match("-1", "-1\\%") and answers_match("50\\%", "0.5")


def test_bfcl_relevance_rows_need_a_call_and_integer_parameters_refuse_floats():
    functions = [{"name": "get_weather", "parameters": {"type": "dict", "properties": {"days": {"type": "integer"}}}}]
    assert check_calls([("get_weather", {"days": 3})], None, functions, category="live_relevance") == (True, "ok")
    assert not check_calls([], None, functions, category="live_relevance")[0]
    assert not check_calls([("other", {})], None, functions, category="live_relevance")[0]
    assert check_calls([], None, functions, category="irrelevance") == (True, "ok")  # irrelevance unchanged
    assert not values_equal(3.0, 3, "integer") and values_equal(3, 3, "integer") and values_equal(3, 3.0, "float")


def test_grading_off_the_main_thread_is_right_and_caches_only_verdicts(monkeypatch):
    import threading

    from rubricgym.envs.math import grader
    from rubricgym.timeouts import WorkerTimeout

    grader.VERDICTS.clear()
    results = []
    thread = threading.Thread(target=lambda: results.append(grader.answers_match("70", "\\frac{280}{4}", 30.0)))
    thread.start()
    thread.join()
    assert results == [True]  # decided in the worker; its start-up does not eat the limit
    worker = grader.shared_worker()
    real_call, calls = worker.call, []

    def flaky(fn, args, timeout, prepare=None, cpu_s=None):  # the first check times out (a loaded machine)
        calls.append(args)
        if len(calls) == 1:
            raise WorkerTimeout("slow")
        return real_call(fn, args, timeout, prepare, cpu_s)

    monkeypatch.setattr(worker, "call", flaky)
    for _ in range(2):
        thread = threading.Thread(target=lambda: results.append(grader.answers_match("9", "\\sqrt{81}", 30.0)))
        thread.start()
        thread.join()
    assert results[1:] == [False, True] and len(calls) == 2  # the timeout was not cached (undecided, then decided)


def test_the_grading_worker_does_not_rerun_an_unguarded_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import threading
        print("SCRIPT RAN", flush=True)
        from rubricgym.envs.math.grader import answers_match
        out = []
        t = threading.Thread(target=lambda: out.append(answers_match("70", "\\\\frac{280}{4}", 60.0)))
        t.start(); t.join()
        print("RESULT", out, flush=True)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("SCRIPT RAN") == 1 and "RESULT [True]" in done.stdout


def test_steps_before_reset_and_after_the_end():
    for env_id, kwargs in ENVS:
        env = gym.make(env_id, **kwargs).unwrapped
        assert isinstance(env, ChatEnv)
        obs, reward, terminated, _, info = env.step("hello")  # before any reset
        assert terminated and reward == 0.0 and info["episode_ended"]


@pytest.mark.filterwarnings("ignore:RULER judge failed:UserWarning")  # the faulty judge's fallback is what is tested; its warning is test_ruler's
def test_every_judge_fault_keeps_every_trajectory():
    import numpy as np

    from rubricgym.testing.hostile import FaultyJudge
    from rubricgym.llm import LLM, LLMConfig

    backend = FaultyJudge()
    judge = LLM(backend, LLMConfig(cache_dir=None, timeout_s=0.05, max_retries=1, backoff_initial_s=0.001,
                                   backoff_max_s=0.002))
    envs = gym.make_vec("MathRuler-v0", num_envs=4, group_size=2, judge=judge, levels=(1,), max_fixes=1)
    seen_failed = seen_scored = episodes = 0
    for seed in range(12):
        obs, info = envs.reset(seed=seed)
        start = time.perf_counter()
        obs, rewards, terminated, truncated, info = envs.step(["\\boxed{3}", "no idea", "\\boxed{7}", "\\boxed{5}"])
        assert time.perf_counter() - start < SLOW_STEP_S * 2  # two groups, each at most a few fault rounds
        assert terminated.all() and np.isfinite(rewards).all() and len(info["trajectory"]) == 4
        episodes += 4
        for i in range(4):
            trajectory = info["trajectory"][i]
            assert trajectory.reward == rewards[i] and trajectory.episode is not None  # nothing lost
            if info["ruler_failed"][i]:
                seen_failed += 1
                assert rewards[i] == trajectory.episode.reward  # the documented fallback: the env's reward
            else:
                seen_scored += 1
                assert 0.0 <= info["ruler_score"][i] <= 1.0
    assert seen_failed and seen_scored and episodes == 48 and backend.calls >= 24
