"""The chat client every judge and verifier uses: one async ``complete`` behind any backend,
with a disk cache, retries with backoff and jitter, a per-call timeout, a concurrency limit,
rate limits (requests and tokens per minute, ``Retry-After``), token and cost accounting, and
JSON replies validated against a pydantic model."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from .jsonutil import JSONExtractionError, extract_json
from .ratelimit import RateLimiter, estimate_tokens, retry_after_s

T = TypeVar("T", bound=BaseModel)


@dataclass
class Completion:
    """One reply, with its token counts and cost; ``cached`` when served from the disk cache."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    key: str = ""
    """The cache key of the request (empty when the reply did not go through :class:`LLM`)."""
    model: str = ""


class ChatBackend(Protocol):
    """What a backend implements: one uncached, unretried call."""

    name: str

    async def complete(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
                       timeout_s: float, **params: Any) -> Completion: ...


@dataclass
class LLMConfig:
    """Knobs shared by every backend."""

    timeout_s: float | None = None
    """Hard limit on one call (the call is abandoned and retried after it); None: the backend's
    own default, 60 s for APIs and servers, 300 s for the in-process model on CPU. With the
    default retries a dead judge costs a step at most 3 x 60 s (plus a few seconds of backoff)."""
    max_retries: int = 2
    """Retries after the first attempt, for errors that can heal (timeouts, connection errors,
    5xx, 429); errors that cannot (bad credentials, bad request, unknown model) are not retried."""
    backoff_initial_s: float = 1.0
    """First backoff; doubles each retry, with full jitter."""
    backoff_max_s: float = 30.0
    """Upper bound of one backoff."""
    max_concurrency: int = 8
    """Calls in flight at once through this client."""
    requests_per_minute: float | None = None
    """Requests sent per minute at most (a token bucket holding one second's worth; None: no limit)."""
    tokens_per_minute: float | None = None
    """Prompt + completion tokens per minute at most: a call reserves prompt characters / 4 plus its
    ``max_tokens`` before it is sent and settles the real count after (None: no limit)."""
    max_retry_after_s: float = 120.0
    """Longest ``Retry-After`` of a 429 that is honoured (every call of the client waits it out)."""
    cache_dir: str | None = field(default_factory=lambda: os.environ.get(
        "RUBRICGYM_LLM_CACHE", str(Path.home() / ".cache" / "rubricgym" / "llm")))
    """Disk cache folder (keyed by the whole request); ``None`` turns caching off."""
    temperature: float = 0.0
    """Default sampling temperature (judges want determinism)."""
    max_tokens: int = 1024
    """Default completion budget."""


@dataclass
class Usage:
    """Running totals of one client."""

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rate_limited: int = 0
    """429 replies received (each retried after its ``Retry-After`` or the backoff)."""
    throttled_s: float = 0.0
    """Seconds calls waited for the rate limits and ``Retry-After`` pauses (summed over calls)."""

    def add(self, completion: Completion) -> None:
        if completion.cached:
            self.cache_hits += 1
            return
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.cost_usd += completion.cost_usd


class LLMCallError(RuntimeError):
    """A call that kept failing after every retry."""


#: what a ``proxy:<url>`` client and ``rubricgym judge-proxy`` agree on: the one deployment's name
#: and the environment variable holding the proxy's key (LiteLLM's own name for it)
PROXY_MODEL = "judge"
PROXY_KEY_ENV = "LITELLM_MASTER_KEY"

#: errors a retry cannot fix (LiteLLM's and OpenAI's names): bad credentials, bad request, unknown model
PERMANENT_ERRORS = {"AuthenticationError", "PermissionDeniedError", "BadRequestError", "NotFoundError",
                    "UnprocessableEntityError", "UnsupportedParamsError", "ContextWindowExceededError",
                    "ContentPolicyViolationError", "InvalidRequestError"}


def is_rate_limit(err: BaseException) -> bool:
    """A 429 (LiteLLM's and OpenAI's ``RateLimitError``, or any error carrying status 429)."""
    return (getattr(err, "status_code", None) == 429 or getattr(err, "status", None) == 429
            or any(cls.__name__ == "RateLimitError" for cls in type(err).__mro__))


def can_heal(err: BaseException) -> bool:
    """Whether retrying ``err`` can help: timeouts, connection errors, 5xx and 429 can, a bad key
    or a malformed request cannot (retrying those only wastes the step's time); a cancelled call
    (``asyncio.CancelledError``, a ``BaseException``) is cancelled, never retried."""
    if not isinstance(err, Exception):
        return False
    return not any(cls.__name__ in PERMANENT_ERRORS for cls in type(err).__mro__)


def sane_token_counts(completion: Completion, estimate: int) -> None:
    """Clamp the token counts a provider reported to what the request could have used (no more
    than a token per prompt character plus the completion budget, four times the estimate): a
    provider that reports 10^12 tokens, a negative or a non-number must not stall the rate limiter
    or poison the usage totals.

    Examples:
        >>> completion = Completion(text="x", prompt_tokens=10**12, completion_tokens="7", model="m")
        >>> sane_token_counts(completion, estimate=100); completion.prompt_tokens, completion.completion_tokens
        (400, 0)
    """
    bound = 4 * max(1, int(estimate))
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(completion, name)
        ok = isinstance(value, int) and not isinstance(value, bool)
        setattr(completion, name, min(bound, max(0, value)) if ok else 0)


class ReplyCache:
    """The disk cache of replies: JSON text only, never pickles.

    diskcache pickles values by default, and its reader unpickles whatever a row says it holds,
    so anyone who can write the cache folder could run code in the trainer. Here values are JSON
    strings, the reader refuses any pickled row, a corrupt or unreadable entry is a miss (and is
    dropped), and a cache database that cannot be opened is moved aside and rebuilt.
    """

    def __init__(self, folder: str):
        import diskcache

        class TextOnlyDisk(diskcache.Disk):
            def fetch(self, mode, filename, value, read):
                if mode == diskcache.core.MODE_PICKLE:
                    raise ValueError("a pickled cache entry is refused")
                return super().fetch(mode, filename, value, read)

        self.folder = folder
        try:
            self._cache = diskcache.Cache(folder, size_limit=2**30, disk=TextOnlyDisk)
            self._cache.get("probe")  # reads the database: a corrupt file fails here, not on first use
        except Exception as err:  # sqlite3.DatabaseError and friends: keep the bad folder for a look
            aside = f"{folder}.corrupt-{int(time.time())}"
            os.replace(folder, aside)
            warnings.warn(f"the LLM cache at {folder} could not be read ({type(err).__name__}); moved it to {aside} "
                          "and started a new one", stacklevel=3)
            self._cache = diskcache.Cache(folder, size_limit=2**30, disk=TextOnlyDisk)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            text = self._cache.get(key)
            value = None if text is None else json.loads(text)
        except Exception:  # a corrupt, truncated or foreign entry is a miss
            self.delete(key)
            return None
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict[str, Any]) -> None:
        try:
            self._cache.set(key, json.dumps(value))
        except Exception as err:  # a full disk or a broken database must not fail the call
            warnings.warn(f"could not write the LLM cache at {self.folder}: {type(err).__name__}: {err}", stacklevel=2)

    def delete(self, key: str) -> None:
        try:
            self._cache.delete(key)
        except Exception:
            pass


class LLM:
    """A chat client: backend + cache + retries + timeout + concurrency limit + accounting.

    Examples:
        >>> llm = make_llm("openai/gpt-4o-mini")                        # doctest: +SKIP
        >>> reply = asyncio.run(llm.complete([{"role": "user", "content": "Hi"}]))  # doctest: +SKIP
        >>> llm.usage.calls, reply.text                                 # doctest: +SKIP
    """

    def __init__(self, backend: ChatBackend, config: LLMConfig | None = None):
        self.backend = backend
        self.config = config or LLMConfig()
        self.timeout_s = float(self.config.timeout_s or getattr(backend, "default_timeout_s", 60.0))
        self.usage = Usage()
        self.name = backend.name
        self._lock = threading.Lock()
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        self._cache = ReplyCache(self.config.cache_dir) if self.config.cache_dir else None
        self.limiter = RateLimiter(self.config.requests_per_minute, self.config.tokens_per_minute)

    def __deepcopy__(self, memo: dict) -> "LLM":
        # a client is a shared resource (cache, usage totals, limits): env specs copied by
        # Gymnasium keep pointing at the same one
        return self

    def _semaphore(self) -> asyncio.Semaphore:
        # one semaphore per event loop (asyncio.run makes a new loop each time)
        loop_id = id(asyncio.get_running_loop())
        with self._lock:
            if loop_id not in self._semaphores:
                self._semaphores[loop_id] = asyncio.Semaphore(self.config.max_concurrency)
            return self._semaphores[loop_id]

    def cache_key(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None, params: dict[str, Any]) -> str:
        # ASCII escapes keep any text hashable, lone surrogates from a model's reply included
        payload = json.dumps({"model": self.backend.name, "messages": messages, "response_format": response_format,
                              "params": params}, sort_keys=True, ensure_ascii=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    async def complete(self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None = None,
                       *, use_cache: bool = True, store: bool = True, **params: Any) -> Completion:
        """One chat completion (cached, retried, time-limited, counted). ``store=False`` leaves a
        fresh reply out of the cache until the caller has validated it (:meth:`remember`)."""
        params = {"temperature": self.config.temperature, "max_tokens": self.config.max_tokens, **params}
        key = self.cache_key(messages, response_format, params)
        if use_cache and self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                try:
                    completion = Completion(**{**hit, "cached": True, "key": key})
                except TypeError:  # an entry of another shape is a miss
                    self._cache.delete(key)
                else:
                    self.usage.add(completion)
                    return completion
        completion = await self._call_with_retries(messages, response_format, params)
        completion.key = key
        self.usage.add(completion)
        if store:
            self.remember(completion)
        return completion

    def remember(self, completion: Completion) -> None:
        """Cache a reply (only replies that were usable: failures are never cached)."""
        if self._cache is not None and completion.key and not completion.cached:
            self._cache.set(completion.key, {k: v for k, v in asdict(completion).items() if k not in ("cached", "key")})

    def forget(self, completion: Completion) -> None:
        """Drop a cached reply that turned out unusable, so the next identical request calls again."""
        if self._cache is not None and completion.key:
            self._cache.delete(completion.key)

    async def _call_with_retries(self, messages, response_format, params) -> Completion:
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=wait_random_exponential(multiplier=self.config.backoff_initial_s, max=self.config.backoff_max_s),
            retry=retry_if_exception(can_heal),
            reraise=True,
        )
        estimate = estimate_tokens(messages, params.get("max_tokens", self.config.max_tokens))
        try:
            async for attempt in retrying:
                with attempt:
                    # also waits out a Retry-After pause
                    self.usage.throttled_s += await self.limiter.acquire(estimate)
                    async with self._semaphore():
                        try:
                            # backends enforce timeout_s themselves (HTTP timeout, max_time); the outer
                            # limit is the safety net for one that does not, with a little grace (more
                            # for a backend that can only stop between tokens)
                            completion = await asyncio.wait_for(
                                self.backend.complete(messages, response_format, self.timeout_s, **params),
                                timeout=1.25 * self.timeout_s + getattr(self.backend, "stop_grace_s", 0.0),
                            )
                        except Exception as err:
                            if is_rate_limit(err):
                                self.usage.rate_limited += 1
                                pause = retry_after_s(err)
                                if pause:
                                    self.limiter.pause(min(pause, self.config.max_retry_after_s))
                            self.limiter.settle(estimate, 0)  # a failed call used nothing we know of
                            raise
                    sane_token_counts(completion, estimate)
                    self.limiter.settle(estimate, completion.prompt_tokens + completion.completion_tokens)
                    return completion
        except Exception as err:
            self.usage.failures += 1
            kind = "timed out" if isinstance(err, asyncio.TimeoutError) else f"{type(err).__name__}: {str(err)[:300]}"
            tries = f"after {self.config.max_retries + 1} attempts" if can_heal(err) else "(not retried: it cannot heal)"
            raise LLMCallError(f"{self.name}: call failed {tries} ({kind})") from err
        raise AssertionError("unreachable")

    async def expected_scores(self, messages: list[dict[str, Any]], reply_prefixes: list[str]) -> tuple[list[float], int]:
        """G-Eval scores read from the backend's next-token distribution (backends that expose
        ``expected_scores``: the in-process judge), counted in :attr:`usage` as one call with its
        prompt tokens, like a written reply. Returns the scores and the prompt tokens read."""
        score = getattr(self.backend, "expected_scores", None)
        if score is None:
            raise NotImplementedError(f"{self.name}: no next-token probabilities (only the in-process judge has them)")
        scores, prompt_tokens = await asyncio.to_thread(score, messages, reply_prefixes)
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        return scores, prompt_tokens

    async def choose_sequence(self, messages: list[dict[str, Any]], prefix: str, options: Sequence[str], count: int,
                              separator: str, suffix: str, schema: dict[str, Any] | None = None) -> list[int]:
        """Greedy choices read from the backend's next-token distribution (backends that expose
        ``choose_sequence``: the in-process model), counted in :attr:`usage` as one call."""
        choose = getattr(self.backend, "choose_sequence", None)
        if choose is None:
            raise NotImplementedError(f"{self.name}: no next-token probabilities (only the in-process model has them)")
        chosen, prompt_tokens = await asyncio.to_thread(choose, messages, prefix, options, count, separator, suffix, schema)
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += count
        return chosen

    async def complete_json(self, messages: list[dict[str, Any]], model: type[T], *,
                            check: Callable[[T], str | None] | None = None, schema: dict[str, Any] | None = None,
                            max_fixes: int = 2, **params: Any) -> tuple[T, Completion]:
        """A reply parsed into ``model``; invalid replies are sent back with the problem for a fix.

        ``check`` returns a problem description (or None) for semantic checks beyond the schema
        (e.g. one score per trajectory). ``schema`` overrides the JSON schema sent as
        ``response_format`` (servers that support it constrain decoding to it).
        """
        response_format = {"type": "json_object", "schema": schema or model.model_json_schema()}
        conversation = list(messages)
        problem = ""
        for _ in range(max_fixes + 1):
            completion = await self.complete(conversation, response_format, store=False, **params)
            try:
                value = model.model_validate(extract_json(completion.text))
                problem = check(value) if check else None
                if not problem:
                    self.remember(completion)  # only a reply that validated is cached
                    return value, completion
            except (JSONExtractionError, ValidationError, RecursionError) as err:
                problem = f"{type(err).__name__}: {str(err)[:500]}"
            self.forget(completion)  # an invalid reply cached by an older version must not come back
            conversation = list(messages) + [
                {"role": "assistant", "content": completion.text[:4000]},
                {"role": "user", "content": f"That reply is not valid: {problem}\nReply again with only the corrected JSON object."},
            ]
        raise LLMCallError(f"{self.name}: no valid JSON reply after {max_fixes + 1} attempts ({problem})")


def make_llm(model: str | LLM | ChatBackend, *, api_base: str | None = None, api_key: str | None = None,
             config: LLMConfig | None = None, knob: str = "judge", **backend_kwargs: Any) -> LLM:
    """Build a client from a LiteLLM model string, ``"local"`` (in-process default model), or a backend.

    ``api_base`` points LiteLLM at a local OpenAI-compatible server (vLLM, llama.cpp): use the
    ``openai/<name>`` model string with it. ``proxy:<url>`` is a ``rubricgym judge-proxy`` (LiteLLM's
    proxy: one rate limit and cache for every process that judges through it). ``knob``: the
    setting ``model`` came from, named in the error when it is none of these.
    """
    if isinstance(model, LLM):
        return model
    if not isinstance(model, str):
        if not callable(getattr(type(model), "complete", None)):  # a backend is any object with complete()
            raise ValueError(f"{knob}: a judge is a model string ('local', 'local:<checkpoint>', 'openai/<name>', "
                             f"'oracle:<accuracy>', 'proxy:<url>'), an LLM or a backend with complete(); "
                             f"got {type(model).__name__} {model!r:.60}")
        return LLM(model, config)
    if model == "local" or model.startswith("local:"):
        from .backends import TransformersBackend

        return LLM(TransformersBackend(model.removeprefix("local").removeprefix(":") or None, **backend_kwargs), config)
    from .backends import LiteLLMBackend

    if model.startswith("proxy:"):  # `rubricgym judge-proxy`: LiteLLM's proxy serves the judge as "judge"
        url = model.removeprefix("proxy:").rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a judge proxy is proxy:<http(s) URL>, got {model!r}")
        key = api_key or os.environ.get(PROXY_KEY_ENV)
        if not key:
            raise ValueError(f"{model}: set {PROXY_KEY_ENV} to the proxy's key (rubricgym judge-proxy prints it)")
        return LLM(LiteLLMBackend(f"openai/{PROXY_MODEL}", api_base=url, api_key=key, **backend_kwargs), config)
    return LLM(LiteLLMBackend(model, api_base=api_base, api_key=api_key, **backend_kwargs), config)
