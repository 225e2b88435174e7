"""What the ``OpenEnv-v0`` client reads from servers, apart from the env itself: which server of a
list an env takes, the documents a server publishes (``/schema``, ``/metadata``), the text field of
a foreign action, a foreign observation as text, and the checks a reply must pass
(:class:`ProtocolError`). Split from :mod:`rubricgym.openenv.client` (the env)."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any, Iterator

from rubricgym.openenv import auth_headers


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What connection failures look like through OpenEnv's client: a closed socket, a refused
    connect, a timeout, and websockets' own ``ConnectionClosed`` (a cut mid-message; not an OSError)."""
    try:
        from websockets.exceptions import ConnectionClosed
    except ImportError:  # openenv not installed: the env refuses to start anyway
        return (ConnectionError, TimeoutError, OSError)
    return (ConnectionError, TimeoutError, OSError, ConnectionClosed)


_CONNECTION_ERRORS = _connection_errors()


def _finite(value: Any) -> bool:
    """A JSON number that is finite (not a bool, NaN or an infinity)."""
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a schema part that is missing or damaged)."""
    return value if isinstance(value, dict) else {}


class ProtocolError(ConnectionError):
    """The server answered with something the env cannot pass on (a non-finite reward, an
    observation that is not a chat): treated as a lost session, never handed to the agent."""


#: how many envs each list of servers has handed out (round robin, per list)
_SERVER_TURNS: dict[tuple[str, ...], Iterator[int]] = {}
_SERVER_LOCK = threading.Lock()


def pick_server(urls: str) -> str:
    """The next server of a comma-separated list, in turn (one server: itself).

    Examples:
        >>> [pick_server("http://a:1, http://b:2") for _ in range(3)]
        ['http://a:1', 'http://b:2', 'http://a:1']
    """
    servers = tuple(server_urls(urls))
    with _SERVER_LOCK:
        turn = next(_SERVER_TURNS.setdefault(servers, itertools.count()))
    return servers[turn % len(servers)]


def server_urls(servers: str) -> list[str]:
    """The URLs of a comma-separated list, without trailing slashes."""
    return [u.strip().rstrip("/") for u in servers.split(",") if u.strip()]


def served_variant(env_id: str, kwargs: dict[str, Any], servers: str, timeout_s: float = 10.0) -> tuple[str, dict[str, Any]]:
    """The id and kwargs that play ``env_id``'s episodes on ``servers`` (comma-separated URLs of
    ``rubricgym serve <base id>``): ``OpenEnv-v0`` with ``env_id``'s reward scheme, whose group
    scoring stays in this process, where whole groups are. The family's knobs are the servers'
    (start them with the run's); each server is asked which env it serves, and one serving another
    base env, or none, is refused here.

    Examples:
        >>> served_variant("MathRuler-v0", {"judge": "oracle:1.0", "levels": (1,)}, "http://a:1,http://b:2")  # doctest: +SKIP
        ('OpenEnvRuler-v0', {'url': 'http://a:1,http://b:2', 'judge': 'oracle:1.0'})
    """
    from rubricgym.registration import ENVS, base_env_id, scheme_of, split_kwargs

    urls = server_urls(servers)
    if not urls:
        raise ValueError("env_servers is empty: give comma-separated OpenEnv server URLs (`rubricgym serve ID`)")
    scheme = scheme_of(env_id)
    served_id = f"OpenEnv{scheme.suffix}-v0" if scheme else "OpenEnv-v0"
    if served_id not in ENVS:
        usable = sorted(k for k in ENVS if k.startswith("OpenEnv"))
        raise ValueError(f"{env_id}'s reward scheme ({scheme.name}) needs its family in this process; over served envs "
                         f"only {usable} run (serve the judged id itself to score each session on the server)")
    base = base_env_id(env_id)
    for url in urls:
        name = _server_json(url, "metadata", timeout_s).get("name")
        if name != base:
            raise ValueError(f"the server at {url} serves {name!r}, not {base!r} ({env_id}'s base env): "
                             f"start it with `rubricgym serve {base}`")
    return served_id, {"url": ",".join(urls), **split_kwargs(env_id, kwargs)[1]}


def _server_json(url: str, path: str, timeout_s: float, token: str | None = None) -> dict[str, Any]:
    """One JSON document of an OpenEnv server (``schema``, ``metadata``); any failure is a ConnectionError naming it."""
    import httpx

    where = f"{url.rstrip('/')}/{path}"
    try:
        response = httpx.get(where, timeout=timeout_s, headers=auth_headers(token))
        response.raise_for_status()
        document = response.json()
    except Exception as error:  # any failure: the URL is not an OpenEnv server we can reach
        raise ConnectionError(f"cannot read the OpenEnv {path} at {where}: {error}") from error
    if not isinstance(document, dict):
        raise ConnectionError(f"the OpenEnv {path} at {where} is a JSON {type(document).__name__}, not an object")
    return document


def text_field(action_schema: dict[str, Any]) -> str:
    """The one string field of an OpenEnv action schema (required ones first), else a clear error.

    Examples:
        >>> text_field({"properties": {"message": {"type": "string"}, "metadata": {"type": "object"}},
        ...             "required": ["message"]})
        'message'
    """
    properties = _object(action_schema.get("properties"))
    strings = [name for name, spec in properties.items() if _object(spec).get("type") == "string"]
    required_names = action_schema.get("required")
    required = [name for name in strings if isinstance(required_names, list) and name in required_names]
    for candidates in (required, strings):
        if len(candidates) == 1:
            return candidates[0]
    raise ValueError(f"the server's action has no single text field (string fields: {strings}); "
                     "name one with action_field=...")


def render_observation(observation: dict[str, Any]) -> str:
    """A foreign observation as the text of a user message: its one text field, else ``name: value``
    lines (JSON for values that are not text).

    Examples:
        >>> render_observation({"echoed_message": "hi", "metadata": {}})
        'hi'
        >>> render_observation({"board": "X..", "legal_moves": [1, 2]})
        'board: X..\\nlegal_moves: [1, 2]'
    """
    fields = {k: v for k, v in observation.items() if k not in ("metadata", "done", "reward")}
    texts = [v for v in fields.values() if isinstance(v, str)]
    if len(fields) == 1 and texts:
        return texts[0]
    return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in fields.items())


def _passed(metadata: dict[str, Any]) -> dict[str, Any]:
    """The server's step info that this env passes on (its own keys are set here)."""
    return {"reward_components": {}, **{k: v for k, v in metadata.items() if k not in ("task_id", "system_prompt", "turn", "tools")}}
