"""RULER through LiteLLM against a real OpenAI-compatible server on loopback (llama.cpp + SmolLM2)."""

import subprocess
import sys

import pytest

from rubricgym.llm import LLMConfig, make_llm
from rubricgym.testing.examples import load_refund_group
from rubricgym.judges.ruler import RulerConfig, ruler_score_sync
from judges import gold

pytestmark = [pytest.mark.server, pytest.mark.slow]


def test_ruler_through_litellm_schema_constrained(llama_server, shared_data, tmp_path):
    judge = make_llm("openai/smollm2", api_base=llama_server,
                     config=LLMConfig(cache_dir=str(tmp_path / "cache"), timeout_s=120, max_retries=1))
    labels, group = load_refund_group()
    result = ruler_score_sync(group, judge, RulerConfig(max_tokens=400))
    print("\nscores:", dict(zip(labels, result.scores)), "calls:", result.judge_calls)
    assert not result.failed, result.error
    # the server held the reply to the schema: one call, no fix request, one score per id, capped explanations
    assert result.judge_calls == 1 and judge.usage.calls == 1 and result.unique == 4
    assert [len(r) for r in result.raw_scores] == [1, 1, 1, 1] and all(len(e) <= 160 for e in result.explanations)
    assert judge.usage.prompt_tokens > 100
    calls = judge.usage.calls
    again = ruler_score_sync(group, judge, RulerConfig(max_tokens=400))
    assert again.scores == result.scores
    assert judge.usage.calls == calls and again.cache_hits >= 1  # the repeat is served from the cache


def test_cli_judge_against_server(llama_server, tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "refund_group.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "rubricgym", "judge", str(example), "--judge", "openai/smollm2",
         "--api-base", llama_server, "--no-cache", "--debug", "--max-tokens", "400", "--timeout", "300"],
        capture_output=True, text=True, timeout=600)
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    ranked = [line.split()[1] for line in lines[:4]]
    scores = [float(line.split()[2]) for line in lines[:4]]
    assert sorted(ranked) == ["faithful", "hallucinating", "off_context", "verbose"]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)  # a ranking, best first
    assert lines[-1].startswith("judge=openai/smollm2@") and "calls=" in lines[-1]


def test_math_rubric_through_the_real_server(llama_server, tmp_path):
    import gymnasium as gym
    import numpy as np

    import rubricgym  # noqa: F401

    client = make_llm("openai/smollm2", api_base=llama_server,
                      config=LLMConfig(cache_dir=str(tmp_path / "cache"), timeout_s=300, max_retries=1))
    envs = gym.make_vec("MathRubric-v0", num_envs=4, group_size=4, verifier=client, rubricator=client,
                        rubrics_per_group=1, levels=(1,))
    _, info = envs.reset(seed=0)
    answer = gold(info["task_id"])[0]
    _, rewards, terminated, _, info = envs.step([
        f"Add the two numbers: the sum is {answer}. Check: it matches. \\boxed{{{answer}}}",
        f"The sum is \\boxed{{{answer}}}", "I guess \\boxed{-100}", "Maybe \\boxed{-100}"])
    stats = info["rubric_stats"][0]
    print("\nrewards:", rewards, "stats:", stats, "calls:", client.usage.calls)
    assert terminated.all() and np.isfinite(rewards).all()
    outcome = np.array([1.0, 1.0, -1.0, -1.0])
    cot = np.asarray(info["reward_components"]["cot"], dtype=float)
    assert rewards == pytest.approx(outcome + cot) and ((cot >= 0) & (cot <= 1)).all()
    # the fixed rubricator is held to the rubric schema (3 to 6 items) and every item is verified on every rollout
    assert stats["format_rate"] == 1.0 and 3 <= stats["num_items"] <= 6
    assert client.usage.calls == 1 + 4 and stats["verifier_failures"] == 0  # one rubric call, one verifier call per rollout
