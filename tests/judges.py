"""Scripted judge doubles for logic tests (the real-server tests use llama.cpp)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Callable

from rubricgym.llm import Completion, LLM, LLMConfig

BLOCK = re.compile(r'<trajectory id="(t\d+)">\n(.*?)\n</trajectory>', re.DOTALL)


def trajectory_blocks(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(id, body) of each trajectory block in the judge prompt, in presentation order."""
    prompt = next(m["content"] for m in messages if m["role"] == "user")  # fix requests append after it
    return BLOCK.findall(prompt)


def score_by_marker(body: str) -> float:
    """Trajectories in tests carry 'quality=<x>' in their last reply; correct math answers score 0.9."""
    match = re.search(r"quality=(-?[\d.]+)", body)
    return float(match.group(1)) if match else 0.5


def reply_scores(messages, scorer: Callable[[str], float] = score_by_marker, reverse: bool = True) -> str:
    blocks = trajectory_blocks(messages)
    items = [{"trajectory_id": tid, "explanation": f"judged {tid}", "score": scorer(body)} for tid, body in blocks]
    if reverse:
        items.reverse()  # answer out of presentation order: matching must use the ids
    return json.dumps({"scores": items})


class ScriptedBackend:
    """A backend whose replies come from ``script(messages, call_index)`` (a str, or an exception to raise)."""

    def __init__(self, script: Callable[[list[dict[str, Any]], int], Any], delay_s: float = 0.0, name: str = "scripted",
                 cost_per_call: float = 0.0):
        self.script, self.delay_s, self.name, self.cost_per_call = script, delay_s, name, cost_per_call
        self.requests: list[list[dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages, response_format, timeout_s, **params) -> Completion:
        self.requests.append(messages)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            reply = self.script(messages, len(self.requests) - 1)
        finally:
            self.in_flight -= 1
        if isinstance(reply, BaseException):
            raise reply
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        return Completion(text=reply, prompt_tokens=prompt_tokens, completion_tokens=len(reply.split()), model=self.name,
                          cost_usd=self.cost_per_call)


def scripted_judge(script=None, cache_dir=None, **config) -> tuple[LLM, ScriptedBackend]:
    backend = ScriptedBackend(script or (lambda messages, i: reply_scores(messages)))
    llm = LLM(backend, LLMConfig(cache_dir=cache_dir, backoff_initial_s=0.01, backoff_max_s=0.02, **config))
    return llm, backend


def gold(task_ids):
    """The reference answer(s) of generated math tasks, from their ids (the env keeps references
    out of ``info``, so tests that play the right answer look it up the way a grader would)."""
    from rubricgym.envs.math.tasks import parse_task_id

    if isinstance(task_ids, str):
        return parse_task_id(task_ids).answer
    return [parse_task_id(str(t)).answer for t in task_ids]
