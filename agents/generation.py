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

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, Sequence

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
        import httpx

        self.config = config or ServerConfig()
        self.name = f"server:{self.config.url}"
        self._client = httpx.Client(timeout=self.config.timeout_s)
        self._served: str | None = None  # the adapter name samples come from (None: the base model)
        self._adapter_root = Path(self.config.adapter_dir or tempfile.mkdtemp(prefix="rubricgym-adapters-"))
        self.reloads = 0

    # -- HTTP ------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        import httpx
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        url = self.config.url.rstrip("/") + path

        def attempt() -> dict[str, Any]:
            try:
                response = self._client.request(method, url, json=body)
            except httpx.HTTPError as err:  # refused, reset, timed out: the server may come back
                raise _Transient(f"{type(err).__name__}: {err}") from err
            if response.status_code >= 500 or response.status_code == 429:
                raise _Transient(f"HTTP {response.status_code}: {response.text[:300]}")
            if response.status_code >= 400:  # a request the server will never accept: no retry
                raise RolloutServerError(f"{method} {url} was refused: HTTP {response.status_code}: {response.text[:500]}")
            try:
                return response.json()
            except ValueError:
                raise _Transient(f"a reply that is not JSON: {response.text[:200]!r}") from None

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
            listed = self._call("GET", "/models").get("data") or []
            if not listed:
                raise RolloutServerError(f"the rollout server at {self.config.url} lists no model")
            self.config.model = str(listed[0]["id"])
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
            choices = sorted(self._call("POST", "/completions", body).get("choices") or [], key=lambda c: c.get("index", 0))
        else:  # plain servers (llama.cpp) take one prompt per request: sent concurrently, they batch them
            from concurrent.futures import ThreadPoolExecutor

            body["stop"] = [policy.tokenizer.decode([i]) for i in policy.stop_ids]
            texts = [policy.tokenizer.decode(p, skip_special_tokens=False) for p in prompts]
            with ThreadPoolExecutor(max_workers=min(len(texts), 8)) as pool:
                replies = list(pool.map(lambda text: self._call("POST", "/completions", {**body, "prompt": text}), texts))
            choices = [(reply.get("choices") or [None])[0] for reply in replies]
        if len(choices) != len(prompts) or any(c is None for c in choices):
            raise RolloutServerError(f"the rollout server returned {len(choices)} completions for {len(prompts)} prompts")
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
            ids = choice.get("token_ids")
            if ids is None:
                raise RolloutServerError("the rollout server returned no token_ids: vLLM >= 0.10.2 returns them with "
                                         "return_token_ids; for other servers use api='openai'")
            ids = [int(i) for i in ids]
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
