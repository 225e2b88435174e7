"""Where the policy's samples come from: the generation-backend protocol and its two backends.

:class:`InProcessGenerator` is transformers ``generate`` on the trained model itself (the
default). :class:`ServerGenerator` sends token prompts to an OpenAI-compatible server and, after
every update, loads the current LoRA adapter into it through vLLM's runtime endpoint
(``POST /v1/load_lora_adapter``, server started with ``--enable-lora``), as ART does; rollouts are
then sampled by the serving engine from the weights being trained.

The trainer never trusts the server's log-probs for the loss: it recomputes them with its own
forward pass (the old policy of the clipped ratio), and logs the importance ratio between its
log-probs and the server's (``rollout_ratio_mean``, ``rollout_logprob_abs_diff``) as a drift check:
a ratio far from 1 means the server does not sample from the weights being trained (a reload that
did not take, another precision, another model).

    vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --enable-lora --max-lora-rank 16 --port 8000
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True  # in the server's environment
    rubricgym train --rollout-server http://127.0.0.1:8000/v1 --env Math-v0 --steps 30
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, Sequence

from rubricgym.judges.base import run_sync

if TYPE_CHECKING:
    from .policy import Policy, Sample


class Generator(Protocol):
    """A generation backend: samples completions of token prompts, and follows weight updates."""

    name: str

    def generate(self, policy: "Policy", prompts: list[list[int]], max_new_tokens: int, temperature: float,
                 greedy: bool) -> list["Sample"]:
        """One completion per prompt, with the sampled token ids and their log-probs."""
        ...

    def sync(self, policy: "Policy", step: int) -> dict[str, float]:
        """Make the next samples come from ``policy``'s current weights; returns timings to log."""
        ...


class InProcessGenerator:
    """transformers ``generate`` on the policy's own model: always in sync, nothing to load."""

    name = "in-process"

    def generate(self, policy, prompts, max_new_tokens, temperature, greedy):
        return policy._generate(prompts, max_new_tokens, temperature, greedy)

    def sync(self, policy, step):
        return {}


class RolloutServerError(RuntimeError):
    """The rollout server could not be reached or answered wrongly after every retry."""


class _Transient(Exception):
    """A failure worth another try (refused, reset, timed out, 5xx, 429, a reply that is not JSON)."""


@dataclass
class ServerConfig:
    """How to reach an OpenAI-compatible rollout server."""

    url: str = "http://127.0.0.1:8000/v1"
    """Base URL, up to and including ``/v1``."""
    model: str | None = None
    """The served base model's name; None: the first one ``GET /v1/models`` lists."""
    api: Literal["vllm", "openai"] = "vllm"
    """``vllm``: prompts sent as token ids, sampled ids returned (``return_token_ids``), LoRA
    loaded at runtime. ``openai`` (llama.cpp and other plain servers): prompts sent as text and
    the reply re-encoded with the policy's tokenizer, weights never reloaded (evaluation of fixed
    weights, or generation checks)."""
    load_adapter: bool = True
    """Load the adapter after every update (``vllm`` only); training without it samples from stale weights."""
    adapter_dir: str | None = None
    """Where adapters are written for the server to read (the server must see the same path);
    None: a temporary folder."""
    adapter_name: str = "rubricgym"
    """Prefix of the served adapter names (``<prefix>-step<k>``)."""
    timeout_s: float = 120.0
    """Limit on one HTTP call."""
    max_retries: int = 3
    """Retries of a failed call (connection refused, timeout, 5xx), with backoff."""
    backoff_s: float = 1.0
    """First backoff; doubles each retry."""


class ServerGenerator:
    """Samples from an OpenAI-compatible server (vLLM's API); loads the current LoRA after each update.

    Examples:
        >>> generator = ServerGenerator(ServerConfig(url="http://127.0.0.1:8000/v1"))   # doctest: +SKIP
        >>> policy = Policy(PolicyConfig(), generator=generator)                          # doctest: +SKIP
    """

    def __init__(self, config: ServerConfig | None = None):
        self.config = config or ServerConfig()
        self.name = f"server:{self.config.url}"
        self._served: str | None = None  # the adapter name samples come from (None: the base model)
        self._adapter_root = Path(self.config.adapter_dir or tempfile.mkdtemp(prefix="rubricgym-adapters-"))
        self.reloads = 0

    # -- HTTP ------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              check: Callable[[Any], str | None] | None = None) -> dict[str, Any]:
        """One request under one deadline (``timeout_s`` for connecting and the whole body: a server
        that drips a byte at a time is cut there too); ``check`` names what is wrong with a reply
        (a malformed reply is retried like a refused connection, then a RolloutServerError)."""
        import httpx
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        url = self.config.url.rstrip("/") + path

        async def fetch() -> tuple[int, bytes]:
            async with httpx.AsyncClient(timeout=self.config.timeout_s) as client:
                response = await client.request(method, url, json=body)
                return response.status_code, response.content

        def attempt() -> dict[str, Any]:
            try:  # the deadline cancels the whole exchange, however slowly the server drips its bytes
                status, content = run_sync(asyncio.wait_for(fetch(), self.config.timeout_s))
            except asyncio.TimeoutError:
                raise _Transient(f"no whole reply within {self.config.timeout_s:g} s") from None
            except httpx.HTTPError as err:  # refused, reset: the server may come back
                raise _Transient(f"{type(err).__name__}: {err}") from err
            text = content.decode("utf-8", errors="replace")
            if status >= 500 or status == 429:
                raise _Transient(f"HTTP {status}: {text[:300]}")
            if status >= 400:  # a request the server will never accept: no retry
                raise RolloutServerError(f"{method} {url} was refused: HTTP {status}: {text[:500]}")
            try:
                reply = json.loads(text)
            except ValueError:
                raise _Transient(f"a reply that is not JSON: {text[:200]!r}") from None
            problem = "the reply is not a JSON object" if not isinstance(reply, dict) else check(reply) if check else None
            if problem:
                raise _Transient(f"a malformed reply: {problem}")
            return reply

        retrying = Retrying(stop=stop_after_attempt(self.config.max_retries + 1), reraise=True,
                            wait=wait_exponential(multiplier=self.config.backoff_s, exp_base=2),
                            retry=retry_if_exception_type(_Transient))
        try:
            return retrying(attempt)
        except _Transient as err:
            raise RolloutServerError(f"the rollout server at {self.config.url} failed {self.config.max_retries + 1} times "
                                     f"({method} {path}): {err}. Is it running (vllm serve ... --enable-lora)?") from err

    def model_name(self) -> str:
        if self.config.model is None:
            def check(reply: dict) -> str | None:
                listed = reply.get("data")
                if not isinstance(listed, list) or not listed:
                    return "'data' is not a non-empty list of models"
                if not isinstance(listed[0], dict) or not isinstance(listed[0].get("id"), str):
                    return "'data[0].id' is not a string"
                return None
            self.config.model = self._call("GET", "/models", check=check)["data"][0]["id"]
        return self.config.model

    # -- the protocol ----------------------------------------------------------------------------

    def generate(self, policy, prompts, max_new_tokens, temperature, greedy):
        from .policy import Sample

        body: dict[str, Any] = {"model": self._served or self.model_name(), "max_tokens": max_new_tokens,
                                "temperature": 0.0 if greedy else temperature,
                                "top_p": 1.0 if greedy else policy.config.top_p, "n": 1,
                                "logprobs": 0 if self.config.api == "vllm" else 1}  # llama.cpp reads 0 as none
        if self.config.api == "vllm":  # one request for the batch: the engine schedules it
            body.update(prompt=[list(p) for p in prompts], return_token_ids=True, stop_token_ids=policy.stop_ids,
                        skip_special_tokens=False, include_stop_str_in_output=True)
            check = partial(check_completions, n=len(prompts), vocab_size=len(policy.tokenizer), token_ids=True)
            choices = sorted(self._call("POST", "/completions", body, check)["choices"], key=lambda c: c.get("index") or 0)
        else:  # plain servers (llama.cpp) take one prompt per request: sent concurrently, they batch them
            from concurrent.futures import ThreadPoolExecutor

            body["stop"] = [policy.tokenizer.decode([i]) for i in policy.stop_ids]
            texts = [policy.tokenizer.decode(p, skip_special_tokens=False) for p in prompts]
            check = partial(check_completions, n=1, vocab_size=len(policy.tokenizer), token_ids=False)
            with ThreadPoolExecutor(max_workers=min(len(texts), 8)) as pool:
                replies = list(pool.map(lambda text: self._call("POST", "/completions", {**body, "prompt": text}, check), texts))
            choices = [reply["choices"][0] for reply in replies]
        samples = []
        for prompt, choice in zip(prompts, choices):
            ids, logprobs = self._tokens(policy, choice)
            finished = choice.get("finish_reason") == "stop"
            if finished and (not ids or ids[-1] not in policy.stop_ids):
                ids.append(policy.stop_ids[-1])  # the end-of-turn token the server stopped on
                logprobs.append(float("nan"))  # not reported: left out of the drift check
            text = policy.tokenizer.decode(ids, skip_special_tokens=True)
            samples.append(Sample(list(prompt), ids, logprobs, text, truncated=not finished,
                                  meta={"logprobs_from": "server"}))
        return samples

    def _tokens(self, policy, choice: dict[str, Any]) -> tuple[list[int], list[float]]:
        reported = (choice.get("logprobs") or {}).get("token_logprobs") or []
        if self.config.api == "vllm":
            ids = list(choice["token_ids"])  # checked: ints inside the vocabulary
            logprobs = [float(x) if x is not None else float("nan") for x in reported]
            if len(logprobs) != len(ids):
                logprobs = (logprobs + [float("nan")] * len(ids))[:len(ids)]
            return ids, logprobs
        # a plain server: its text re-encoded (the ids of the same text, not necessarily the sampled split)
        text = choice.get("text") or ""
        ids = policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        logprobs = [float(x) for x in reported] if len(reported) == len(ids) else [float("nan")] * len(ids)
        return list(ids), logprobs

    def sync(self, policy, step):
        if self.config.api != "vllm" or not self.config.load_adapter or not policy.has_adapter:
            return {}
        started = time.perf_counter()
        name = f"{self.config.adapter_name}-step{step}"
        folder = self._adapter_root / name
        policy.model.save_pretrained(str(folder))  # the adapter only (peft)
        self._call("POST", "/load_lora_adapter", {"lora_name": name, "lora_path": str(folder.resolve())})
        previous, self._served = self._served, name
        if previous is not None:  # keep the server's LoRA slots free; a failed unload only wastes a slot
            try:
                self._call("POST", "/unload_lora_adapter", {"lora_name": previous})
            except RolloutServerError:
                pass
            shutil.rmtree(self._adapter_root / previous, ignore_errors=True)
        self.reloads += 1
        return {"adapter_reload_seconds": time.perf_counter() - started}


def check_completions(reply: dict[str, Any], n: int, vocab_size: int, token_ids: bool) -> str | None:
    """What is wrong with a ``/completions`` reply (None: nothing), naming the field: ``n``
    choices of objects, token ids (vLLM) integers inside the vocabulary, log-probs numbers or null.

    Examples:
        >>> check_completions({"choices": [{"token_ids": [5, 10**12], "text": ""}]}, 1, 100, True)
        'choices[0].token_ids[1] is 1000000000000, outside the vocabulary (0..99)'
        >>> check_completions({"choices": "oops"}, 1, 100, False)
        "'choices' is a str, not a list"
    """
    choices = reply.get("choices")
    if not isinstance(choices, list):
        return f"'choices' is a {type(choices).__name__}, not a list"
    if len(choices) != n:
        return f"{len(choices)} choices for {n} prompts"
    for index, choice in enumerate(choices):
        where = f"choices[{index}]"
        if not isinstance(choice, dict):
            return f"{where} is a {type(choice).__name__}, not an object"
        if not isinstance(choice.get("finish_reason"), (str, type(None))):
            return f"{where}.finish_reason is not a string"
        if not isinstance(choice.get("index", 0), (int, type(None))):
            return f"{where}.index is not an integer"
        if not isinstance(choice.get("text", ""), (str, type(None))):
            return f"{where}.text is not a string"
        logprobs = choice.get("logprobs")
        if logprobs is not None:
            reported = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else logprobs
            if not isinstance(reported, (list, type(None))):
                return f"{where}.logprobs.token_logprobs is not a list"
            for position, value in enumerate(reported or []):
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    return f"{where}.logprobs.token_logprobs[{position}] is {value!r:.40}, not a number"
        if token_ids:
            ids = choice.get("token_ids")
            if not isinstance(ids, list):
                return (f"{where}.token_ids is missing (vLLM >= 0.10.2 returns them with return_token_ids; for "
                        "other servers use api='openai')" if ids is None else f"{where}.token_ids is not a list")
            for position, value in enumerate(ids):
                if isinstance(value, bool) or not isinstance(value, int):
                    return f"{where}.token_ids[{position}] is {value!r:.40}, not an integer"
                if not 0 <= value < vocab_size:
                    return f"{where}.token_ids[{position}] is {value}, outside the vocabulary (0..{vocab_size - 1})"
    return None


def drift_stats(samples: Sequence["Sample"], trainer_logprobs: Sequence[Sequence[float]]) -> dict[str, float]:
    """Importance ratio between the trainer's log-probs and the sampler's, over tokens both have."""
    import math

    ratios, diffs = [], []
    for sample, mine in zip(samples, trainer_logprobs):
        for theirs, own in zip(sample.logprobs, mine):
            if math.isfinite(theirs):
                diffs.append(abs(own - theirs))
                ratios.append(math.exp(max(min(own - theirs, 20.0), -20.0)))
    if not ratios:
        return {}
    return {"rollout_ratio_mean": sum(ratios) / len(ratios), "rollout_ratio_max": max(ratios),
            "rollout_logprob_abs_diff": sum(diffs) / len(diffs)}
