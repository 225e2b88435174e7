"""Client-side rate limits for API judges: requests and tokens per minute, and ``Retry-After``.

Two token buckets refill continuously (``rpm / 60`` requests and ``tpm / 60`` tokens a second)
and hold at most one second's worth, so a burst is spread evenly instead of hitting the
provider's per-minute wall and collecting 429s. A call reserves its estimated tokens (prompt
characters / 4 + its completion budget) before it is sent and settles the difference when the
real counts come back (a debt makes later calls wait). A 429 with ``Retry-After`` pauses every
call of the client until then, not only the one that got it.

Examples:
    >>> limiter = RateLimiter(requests_per_minute=600)
    >>> async def burst():
    ...     for _ in range(3):
    ...         await limiter.acquire(tokens=0)
    >>> asyncio.run(burst()); limiter.waited_s < 1
    True
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from typing import Any


def estimate_tokens(messages: list[dict[str, Any]], max_tokens: int) -> int:
    """Tokens a request may use: its text at about 4 characters a token, plus its completion budget."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + int(max_tokens)


def retry_after_s(err: BaseException) -> float | None:
    """Seconds a rate-limit error asks to wait (``Retry-After``: seconds or an HTTP date), if it says."""
    for source in (err, getattr(err, "__cause__", None)):
        if source is None:
            continue
        value = getattr(source, "retry_after", None)
        headers = getattr(source, "litellm_response_headers", None) or getattr(getattr(source, "response", None),
                                                                                "headers", None)
        if value is None and headers is not None:
            try:
                value = headers.get("retry-after") or headers.get("Retry-After")
            except Exception:  # a mock or foreign object without a mapping interface
                value = None
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            try:
                return max(0.0, email.utils.parsedate_to_datetime(str(value)).timestamp() - time.time())
            except (TypeError, ValueError):
                continue
    return None


class _Bucket:
    def __init__(self, per_minute: float):
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)  # one second's worth
        self.level = self.capacity
        self.updated = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 when it is now); a request larger than the
        bucket waits until the bucket is full and then runs, leaving a debt."""
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


class RateLimiter:
    """Requests-per-minute and tokens-per-minute token buckets shared by every call of a client."""

    def __init__(self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None):
        for name, value in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive (or None for no limit), got {value}")
        self._requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self._lock = threading.Lock()  # the client may run several event loops (one per asyncio.run)
        self._paused_until = 0.0
        self.waited_s = 0.0
        """Seconds calls spent waiting for the limits or a ``Retry-After`` (summed over calls)."""

    @property
    def active(self) -> bool:
        return self._requests is not None or self._tokens is not None

    def _take_or_wait(self, tokens: int) -> float:
        with self._lock:
            now = time.monotonic()
            wait = max(0.0, self._paused_until - now)
            for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
                if bucket is not None:
                    bucket.refill(now)
                    wait = max(wait, bucket.wait_for(amount))
            if wait > 0:
                return wait
            for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
                if bucket is not None:
                    bucket.level -= amount
            return 0.0

    async def acquire(self, tokens: int) -> float:
        """Wait until one request of ``tokens`` estimated tokens fits both limits, then take it;
        returns the seconds waited."""
        waited = 0.0
        while (wait := self._take_or_wait(tokens)) > 0:
            waited += wait
            await asyncio.sleep(wait)
        self.waited_s += waited
        return waited

    def settle(self, estimated: int, used: int) -> None:
        """Charge (or refund) the difference between a call's estimated and real tokens."""
        if self._tokens is not None:
            with self._lock:
                self._tokens.refill(time.monotonic())
                # a debt of at most a minute's tokens: a wrong count never stalls later calls for long
                level = self._tokens.level + estimated - used
                self._tokens.level = max(-60.0 * self._tokens.rate, min(self._tokens.capacity, level))

    def pause(self, seconds: float) -> None:
        """Hold every call for ``seconds`` (a provider's ``Retry-After``)."""
        with self._lock:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)
