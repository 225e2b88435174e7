"""The in-process backend with the real default model file (SmolLM2-135M-Instruct GGUF)."""

import asyncio
import time

import pytest
from conftest import require  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_llm(tmp_path_factory):
    require("transformers", "agents")
    from rubricgym.llm import LLMConfig, make_llm

    return make_llm("local", config=LLMConfig(cache_dir=str(tmp_path_factory.mktemp("cache")), max_tokens=24))


def test_default_model_converts_and_answers(local_llm):
    from rubricgym.models import default_model_dir

    reply = asyncio.run(local_llm.complete([{"role": "user", "content": "What is 2 + 3? Answer with a number."}]))
    assert isinstance(reply.text, str) and reply.text.strip()
    assert reply.prompt_tokens > 5 and 0 < reply.completion_tokens <= 24
    assert (default_model_dir() / "model.safetensors").is_file()
    again = asyncio.run(local_llm.complete([{"role": "user", "content": "What is 2 + 3? Answer with a number."}]))
    assert again.cached and again.text == reply.text and local_llm.usage.cache_hits == 1


def test_local_generation_respects_the_time_limit(local_llm):
    from rubricgym.llm import LLMConfig
    from rubricgym.llm.client import LLM

    limited = LLM(local_llm.backend, LLMConfig(cache_dir=None, timeout_s=0.5, max_retries=0, max_tokens=2000))
    start = time.perf_counter()
    reply = asyncio.run(limited.complete([{"role": "user", "content": "Write a very long story about a dragon."}]))
    # transformers' max_time stops generation at the limit; the reply is whatever was generated
    assert time.perf_counter() - start < 5 and reply.completion_tokens < 2000


def test_local_judge_is_held_to_the_reply_schema(local_llm):
    """RULER with the in-process default model on the refund example: constrained decoding makes
    the raw reply valid JSON of the schema (ids from the enum, one score each, explanations
    within their cap) on the first call, with no repair and no fix request."""
    import json
    from pathlib import Path

    import jsonschema

    from rubricgym.judges.ruler import RulerConfig, build_judge_messages, response_schema, ruler_score
    from rubricgym.llm import LLMConfig
    from rubricgym.llm.client import LLM

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "examples" / "refund_group.jsonl").open()]
    trajectories = [r["messages"] for r in rows]
    judge = LLM(local_llm.backend, LLMConfig(cache_dir=None, timeout_s=300, max_retries=0))
    config = RulerConfig(max_tokens=400, max_fixes=0, explanation_max_chars=100)
    ids = ["t1", "t2", "t3", "t4"]
    schema = response_schema(ids, 100)
    raw = asyncio.run(judge.complete(build_judge_messages(trajectories, ids, range(4), config, None),
                                     {"type": "json_object", "schema": schema}, max_tokens=400))
    reply = json.loads(raw.text)  # strict JSON: no repair needed
    jsonschema.validate(reply, schema)
    assert sorted(item["trajectory_id"] for item in reply["scores"]) == ids
    result = asyncio.run(ruler_score(trajectories, judge, config))
    assert not result.failed, result.error
    assert result.judge_calls == 1 and len(result.scores) == 4 and result.unique == 4


def test_local_verifier_and_rubricator_follow_their_schemas(local_llm):
    from rubricgym.llm import LLMConfig
    from rubricgym.llm.client import LLM
    from rubricgym.judges.rlcer import RubricItem, verify_rollout, write_rubric

    llm = LLM(local_llm.backend, LLMConfig(cache_dir=None, timeout_s=300, max_retries=0))
    items = [RubricItem(description="states the final answer in a box", score=2),
             RubricItem(description="adds the two numbers step by step", score=1),
             RubricItem(description="contradicts itself", score=-2)]
    verdicts = asyncio.run(verify_rollout(llm, "What is 2 + 3?", "2 + 3 = 5, so \\boxed{5}.", items, max_fixes=0))
    assert verdicts is not None and len(verdicts) == 3 and all(isinstance(v, bool) for v in verdicts)
    rubric_set, text = asyncio.run(write_rubric(llm, "What is 2 + 3?", "2 + 3 = 5, so \\boxed{5}.", author=None))
    assert rubric_set.format_ok, text
    assert 3 <= len(rubric_set.items) <= 6
