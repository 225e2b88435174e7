"""Rate limits of the LLM client: requests and tokens per minute, and 429 ``Retry-After``."""

import asyncio
import time

import pytest

from rubricgym.llm import LLM, LLMConfig
from rubricgym.llm.ratelimit import RateLimiter, retry_after_s

from judges import scripted_judge

pytest.importorskip("tenacity")

HI = [{"role": "user", "content": "hi"}]


async def _burst(llm: LLM, calls: int, messages=HI, **params) -> list:
    return await asyncio.gather(*(llm.complete(messages + [{"role": "user", "content": str(i)}], **params)
                                  for i in range(calls)))


def test_a_burst_of_200_calls_at_600_rpm_spreads_over_the_expected_time():
    llm, backend = scripted_judge(lambda messages, i: "ok", requests_per_minute=600, max_concurrency=64)
    sent: list[float] = []
    script = backend.script
    backend.script = lambda messages, i: (sent.append(time.monotonic()), script(messages, i))[1]
    started = time.monotonic()
    asyncio.run(_burst(llm, 200))
    elapsed = time.monotonic() - started
    # 10 calls a second, a bucket of one second's worth (10) full at the start: 190 / 10 s
    expected = (200 - 10) / 10
    assert expected * 0.9 <= elapsed <= expected * 1.1, elapsed
    assert llm.usage.calls == 200 and llm.usage.throttled_s > 0
    # evenly spread, not front-loaded: no 2-second window holds more than the bucket plus 2 s of refill
    sent.sort()
    assert max(sum(1 for t in sent if start <= t < start + 2.0) for start in sent) <= 10 + 20 + 1


def test_tokens_per_minute_holds_back_big_requests_and_refunds_what_was_not_used():
    text = [{"role": "user", "content": "x" * 400}]  # 100 estimated prompt tokens
    elapsed = {}
    for used in ("all", "little"):
        llm, backend = scripted_judge(lambda messages, i: "ok", tokens_per_minute=60_000, max_concurrency=64)
        # the backend reports the estimate (100 + 100) or far less (the scripted backend counts words)
        if used == "all":
            original = backend.complete

            async def complete(messages, response_format, timeout_s, **params):
                reply = await original(messages, response_format, timeout_s, **params)
                reply.prompt_tokens, reply.completion_tokens = 100, 100
                return reply

            backend.complete = complete
        started = time.monotonic()
        asyncio.run(_burst(llm, 20, messages=text, max_tokens=100))
        elapsed[used] = time.monotonic() - started
    # 1,000 tokens a second, a bucket of 1,000: 20 x 200 tokens take (4,000 - 1,000) / 1,000 s
    assert 3.0 * 0.9 <= elapsed["all"] <= 3.0 * 1.15, elapsed
    assert elapsed["little"] < elapsed["all"] * 0.8, elapsed  # refunds of unused reservations


def test_retry_after_of_a_429_pauses_every_call_and_is_counted():
    from rubricgym.testing.loopback import LoopbackServer, Reply
    from rubricgym.llm import make_llm

    state = {"calls": 0}

    def chat(body):
        state["calls"] += 1
        if state["calls"] == 2:  # the first call warms LiteLLM up (its import and HTTP client take seconds)
            return Reply(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"Retry-After": "2"})
        return "fine"

    with LoopbackServer(chat=chat) as server:
        llm = make_llm("openai/judge", api_base=server.base,
                       config=LLMConfig(cache_dir=None, backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=30))

        async def run():
            await llm.complete([{"role": "user", "content": "warm up"}])
            started.append(time.monotonic())
            first = asyncio.create_task(llm.complete(HI))
            await asyncio.sleep(0.5)  # the 429 has come back: a new call waits for the pause too
            second = await llm.complete([{"role": "user", "content": "other"}])
            return await first, second, time.monotonic()

        started: list[float] = []
        first, second, done = asyncio.run(run())
        assert first.text == second.text == "fine"
        assert done - started[0] >= 2.0  # the retry waited out Retry-After, not the 10 ms backoff
        assert llm.usage.rate_limited == 1 and llm.usage.calls == 3 and llm.usage.throttled_s >= 1.5
        limited_at = server.requests[1][2]
        after = [t - limited_at for _, _, t in server.requests[2:]]
        assert len(after) == 2 and all(t >= 1.9 for t in after), after  # the retry and the call made meanwhile


def test_retry_after_parsing_and_refusals():
    class Err(Exception):
        def __init__(self, headers):
            self.response = type("R", (), {"headers": headers})()

    assert retry_after_s(Err({"retry-after": "3"})) == 3.0
    assert retry_after_s(Err({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # a date in the past
    assert retry_after_s(Err({})) is None and retry_after_s(ValueError("x")) is None
    with pytest.raises(ValueError, match="requests_per_minute must be positive"):
        RateLimiter(requests_per_minute=0)
