"""Judge efficiency: prefix dedup, concurrency and the disk cache, measured over real HTTP.

The loopback OpenAI-compatible server (``rubricgym.testing.loopback``) answers every chat completion after an
injected latency (default 300 ms), counts prompt tokens with a fixed word/punctuation
tokenizer, and returns a valid score for every trajectory id in the prompt. The judge talks to
it through LiteLLM exactly as it would to vLLM or llama.cpp. Three measurements, side by side
in one process:

* ``dedup_token_ratio``: prompt tokens for a group of 8 trajectories sharing a 1,000-token system
  prompt, with the shared prefix sent once over the naive rendering (every trajectory in full);
  target <= 0.35.
* ``concurrency_speedup``: wall time of 16 groups judged one after another over the same 16
  groups at concurrency 8; target >= 5.
* ``cache_calls_on_rerun``: server calls when the 16 groups are judged again; target 0.

    python benchmarks/judge_efficiency.py [--latency-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import tempfile
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubricgym.testing.loopback import LoopbackServer, Reply, chat_body  # noqa: E402
from rubricgym.llm import LLMConfig, make_llm  # noqa: E402
from rubricgym.judges.ruler import RulerConfig, ruler_score  # noqa: E402
from rubricgym.app.flags import add_smoke_flag  # noqa: E402

TOKEN = re.compile(r"\w+|[^\w\s]")
IDS = re.compile(r'<trajectory id="(t\d+)">')


def count_tokens(text: str) -> int:
    return len(TOKEN.findall(text))


class JudgeServer(LoopbackServer):
    """The loopback server with a fixed latency, answering a valid score for every trajectory id
    and counting calls and prompt tokens."""

    def __init__(self, latency_s: float):
        self.calls, self.prompt_tokens = 0, 0
        super().__init__(chat=self.score, latency_s=latency_s)

    def score(self, body: dict) -> Reply:
        prompt = "\n".join(str(m.get("content") or "") for m in body["messages"])
        tokens = count_tokens(prompt)
        with self.lock:
            self.calls += 1
            self.prompt_tokens += tokens
        reply = json.dumps({"scores": [{"trajectory_id": i, "explanation": "ok", "score": 0.5} for i in IDS.findall(prompt)]})
        return Reply(body=chat_body(body.get("model", "judge"), reply, tokens, count_tokens(reply)))


def make_group(group_index: int, system_tokens: int = 1000, size: int = 8) -> list[list[dict]]:
    words = [f"rule{(group_index * 7 + i) % 97}" for i in range(system_tokens)]
    system = {"role": "system", "content": " ".join(words)}
    user = {"role": "user", "content": f"Customer {group_index}: can I return an opened item after 20 days?"}
    return [[system, user, {"role": "assistant", "content": f"Answer variant {k} for customer {group_index}: " + "detail " * (10 + 5 * k)}]
            for k in range(size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=300)
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    add_smoke_flag(parser, latency_ms=5, groups=2, concurrency=2)
    args = parser.parse_args()
    server = JudgeServer(args.latency_ms / 1000)
    cache = tempfile.mkdtemp(prefix="rubricgym-judge-bench-")

    def judge(concurrency: int, cache_dir: str | None):
        return make_llm("openai/judge", api_base=server.base,
                        config=LLMConfig(cache_dir=cache_dir, max_concurrency=concurrency, timeout_s=30))

    # 1. prefix dedup vs naive rendering, one group of 8
    group = make_group(0)
    before = server.prompt_tokens
    asyncio.run(ruler_score(group, judge(1, None), RulerConfig()))
    dedup_tokens = server.prompt_tokens - before
    before = server.prompt_tokens
    asyncio.run(ruler_score(group, judge(1, None), RulerConfig(share_prefix=False, dedup=False)))
    naive_tokens = server.prompt_tokens - before
    dedup_ratio = dedup_tokens / naive_tokens

    # 2. 16 groups sequentially vs at concurrency 8 (no cache, so every call reaches the server)
    groups = [make_group(g) for g in range(1, args.groups + 1)]

    async def sequential(client):
        for g in groups:
            await ruler_score(g, client)

    async def concurrent(client):
        return await asyncio.gather(*(ruler_score(g, client) for g in groups))

    async def timed() -> tuple[float, float]:
        # one event loop for both, each client warmed by one call first: LiteLLM builds its HTTP
        # client once per event loop (about 1 s here), which is set-up, not concurrency
        one, many = judge(1, None), judge(args.concurrency, None)
        for client in (one, many):
            await ruler_score(make_group(999), client)
        start = time.perf_counter()
        await sequential(one)
        middle = time.perf_counter()
        await concurrent(many)
        return middle - start, time.perf_counter() - middle

    sequential_s, concurrent_s = asyncio.run(timed())

    # 3. a re-run with the disk cache costs no server call
    cached = judge(args.concurrency, cache)
    asyncio.run(concurrent(cached))
    calls_before = server.calls
    rerun_client = judge(args.concurrency, cache)  # a fresh client: served from disk
    results = asyncio.run(concurrent(rerun_client))
    rerun_calls = server.calls - calls_before
    assert all(not r.failed for r in results)

    print(f"prompt tokens for a group of 8 with a 1,000-token system prompt: dedup {dedup_tokens}, naive {naive_tokens}")
    print(f"{args.groups} groups at {args.latency_ms:.0f} ms latency: sequential {sequential_s:.2f} s, "
          f"concurrency {args.concurrency} {concurrent_s:.2f} s")
    print(f"re-run of {args.groups} groups: {rerun_calls} server calls, {rerun_client.usage.cache_hits} cache hits")
    print(f"RESULT dedup_token_ratio={dedup_ratio:.3f} concurrency_speedup={sequential_s / concurrent_s:.2f} "
          f"cache_calls_on_rerun={rerun_calls}")
    server.close()


if __name__ == "__main__":
    main()
