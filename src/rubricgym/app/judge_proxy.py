"""One judge endpoint for every rank and node: LiteLLM's own proxy, configured from the judge settings.

Every rank of a multi-node run builds its own judge client, so a client's rate limits and cache
hold per process, not per provider account. ``rubricgym judge-proxy`` writes a LiteLLM proxy
config (the judge model as one deployment named ``judge`` with its ``rpm`` / ``tpm``, retries,
fallbacks, a response cache: in memory, or Redis when several proxies serve one account) and
starts LiteLLM's proxy on it; every judge setting then takes ``proxy:<url>``
(``--judge proxy:http://127.0.0.1:4000``): RULER, the rubrics' verifier, ``judge-eval``, the bench,
the TRL reward functions and the verl group manager all send their calls there. Group scoring
stays where whole groups are (the trainer): the proxy sees single chat completions.

LiteLLM's proxy pins its own dependencies (FastAPI, websockets, ...) that clash with the
``openenv`` server's, so it runs from its own virtualenv: ``rubricgym judge-proxy --install``
makes one (:data:`PROXY_VENV`, ``litellm[proxy]`` at :data:`LITELLM_PROXY_VERSION`).

Examples:
    >>> config = proxy_config(ProxyConfig(model="openai/gpt-4o-mini", rpm=60))
    >>> config["model_list"][0]["model_name"], config["model_list"][0]["litellm_params"]["rpm"]
    ('judge', 60)
    >>> config["router_settings"]["routing_strategy"], config["litellm_settings"]["cache"]
    ('usage-based-routing-v2', True)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

#: LiteLLM's last release whose ``[proxy]`` extra installs from PyPI alone (1.110 needs ``litellm-proxy``)
LITELLM_PROXY_VERSION = "1.108.0"
#: where ``--install`` puts the proxy's own virtualenv (``$RUBRICGYM_PROXY_VENV`` overrides it)
PROXY_VENV = Path(os.environ.get("RUBRICGYM_PROXY_VENV") or Path.home() / ".cache" / "rubricgym" / "litellm-proxy")


@dataclass
class ProxyConfig:
    """Every knob of the judge proxy (``rubricgym judge-proxy`` has a flag for each)."""

    model: str = ""
    """The judge: a LiteLLM model string (``openai/gpt-4o-mini``, ``anthropic/...``, ``openai/<name>``
    with ``api_base``). The in-process ``local`` judge cannot be proxied: serve it (llama.cpp, vLLM)."""
    api_base: str | None = None
    """An OpenAI-compatible server for ``openai/<name>`` models."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable the proxy reads the provider key from (never written to the config);
    with ``api_base`` and the variable unset, a placeholder key (local servers ignore it)."""
    rpm: int = 0
    """Requests per minute for the whole account, across every client of this proxy (0: no limit).
    Calls over it get a 429 that the clients retry after the window."""
    tpm: int = 0
    """Tokens per minute, likewise (0: no limit)."""
    num_retries: int = 2
    """The proxy's own retries of a failed provider call (clients retry on top, with backoff)."""
    timeout_s: float = 120.0
    """Limit on one provider call."""
    fallbacks: tuple[str, ...] = ()
    """Models tried in order when the judge's provider fails (same ``api_base``)."""
    cache: bool = True
    """Cache replies in the proxy: a judgement one rank asked for is free for every other."""
    cache_ttl_s: int = 86400
    """How long a cached reply lives."""
    redis_url: str | None = None
    """``redis://host:port`` shared by several proxies serving one account: the cache and the
    rate-limit counters live there instead of in each proxy's memory."""
    host: str = "127.0.0.1"
    port: int = 4000


def _key(config: ProxyConfig) -> str:
    if config.api_base and not os.environ.get(config.api_key_env):
        return "sk-local"
    return f"os.environ/{config.api_key_env}"


def proxy_config(config: ProxyConfig) -> dict[str, Any]:
    """The LiteLLM proxy config (``litellm --config``) for ``config``: the judge as the deployment
    ``proxy:<url>`` clients ask for, their key read from the environment variable they read."""
    from rubricgym.llm.client import PROXY_KEY_ENV, PROXY_MODEL

    if not config.model:
        raise ValueError("the judge proxy needs a judge model (--judge openai/gpt-4o-mini, or openai/<name> --api-base URL)")
    if config.model == "local" or config.model.startswith(("local:", "oracle:", "proxy:")):
        raise ValueError(f"the proxy serves API models, not {config.model!r}: serve a local judge with llama.cpp or "
                         "vLLM and pass --judge openai/<name> --api-base <its URL>")

    def deployment(name: str, model: str) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model, "api_key": _key(config), "timeout": config.timeout_s}
        if config.api_base:
            params["api_base"] = config.api_base
        params.update({k: v for k, v in (("rpm", config.rpm), ("tpm", config.tpm)) if v})
        return {"model_name": name, "litellm_params": params}

    fallback_names = [f"{PROXY_MODEL}-fallback-{i}" for i in range(len(config.fallbacks))]
    # usage-based-routing-v2 counts a call before sending it: with the default router, concurrent
    # calls all pass the limit check before any is counted (80 of rpm=60 got through in a test);
    # a call over the limit is a 429 at once (no proxy-side retry that would sit out the window
    # past the client's time limit): the clients retry it with backoff
    router: dict[str, Any] = {"enable_pre_call_checks": True, "num_retries": config.num_retries, "timeout": config.timeout_s,
                              "retry_policy": {"RateLimitErrorRetries": 0}}
    if config.rpm or config.tpm:
        router["routing_strategy"] = "usage-based-routing-v2"
    settings: dict[str, Any] = {"drop_params": True, "cache": config.cache}
    if fallback_names:
        settings["fallbacks"] = [{PROXY_MODEL: fallback_names}]
    cache_params: dict[str, Any] = {"type": "local", "ttl": config.cache_ttl_s}
    if config.redis_url:
        url = urlparse(config.redis_url)
        redis = {"redis_host": url.hostname or "127.0.0.1", "redis_port": url.port or 6379}
        if url.password:
            redis["redis_password"] = url.password
        router.update(redis)
        cache_params = {"type": "redis", "ttl": config.cache_ttl_s, **{k.removeprefix("redis_"): v for k, v in redis.items()}}
    if config.cache:
        settings["cache_params"] = cache_params
    return {"model_list": [deployment(PROXY_MODEL, config.model)] + [deployment(n, m) for n, m in zip(fallback_names, config.fallbacks)],
            "router_settings": router, "litellm_settings": settings,
            "general_settings": {"master_key": f"os.environ/{PROXY_KEY_ENV}"}}


def ensure_master_key() -> tuple[str, bool]:
    """The proxy's key from ``$LITELLM_MASTER_KEY`` (LiteLLM's proxy refuses to start without one),
    made and put in this process's environment when unset; and whether it was made."""
    import secrets

    from rubricgym.llm.client import PROXY_KEY_ENV

    key = os.environ.get(PROXY_KEY_ENV)
    if key:
        return key, False
    key = os.environ[PROXY_KEY_ENV] = f"sk-{secrets.token_hex(24)}"
    return key, True


def write_proxy_config(config: ProxyConfig, path: str | Path) -> Path:
    """The config as a file LiteLLM reads (JSON, which is YAML: no YAML writer needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(proxy_config(config), indent=2) + "\n")
    return path


def litellm_command() -> str:
    """The ``litellm`` executable with the proxy's dependencies: the ``--install`` virtualenv's, else PATH's."""
    installed = PROXY_VENV / "bin" / "litellm"
    if installed.is_file():
        return str(installed)
    found = shutil.which("litellm")
    if found is None:
        raise FileNotFoundError(f"no LiteLLM proxy: run `rubricgym judge-proxy --install` (a virtualenv at {PROXY_VENV} "
                                f"with litellm[proxy]=={LITELLM_PROXY_VERSION}), or put a litellm with its [proxy] extra on PATH")
    return found


def proxy_command(config_path: str | Path, config: ProxyConfig, executable: str | None = None) -> list[str]:
    """The command that serves ``config_path`` on ``config.host:config.port``."""
    return [executable or litellm_command(), "--config", str(config_path), "--host", config.host, "--port", str(config.port)]


def install_proxy(venv: Path = PROXY_VENV) -> Path:
    """Make the proxy's own virtualenv (idempotent); returns its ``litellm`` executable. An install
    already running (another process holding ``<venv>.lock``, as CI's early one does) is waited for."""
    import fcntl

    executable = venv / "bin" / "litellm"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not executable.is_file():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"litellm[proxy]=={LITELLM_PROXY_VERSION}"],
                           check=True, timeout=1800)
    return executable


if __name__ == "__main__":
    # CI starts the install this way, beside the main install and before rubricgym is importable
    # (this module needs only the standard library for it); `rubricgym judge-proxy --install` waits on its lock
    print(install_proxy())
