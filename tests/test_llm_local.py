"""The in-process backend with the real default model file (SmolLM2-135M-Instruct GGUF)."""

import asyncio
import time

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_llm(tmp_path_factory):
    pytest.importorskip("transformers")
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
