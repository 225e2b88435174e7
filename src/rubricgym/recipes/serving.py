"""Serving and inspection recipes: ``serve``, ``view``, ``envs``, ``data``."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from . import EnvSettings, JudgeSettings, judge_kwargs, recipe


@dataclass
class ServeRecipe:
    """``rubricgym serve``: one registered id (base or judged) as an OpenEnv environment server."""

    env: EnvSettings = field(default_factory=EnvSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 64
    """Envs alive at once (one per session that has reset)."""
    idle_timeout: float = 300.0
    """Seconds before an idle connection is closed and its env released (0: never)."""
    max_sessions_per_client: int = 0
    """Connections one address may hold at once (0: max-sessions; set it when serving beyond loopback)."""
    sessions_per_minute_per_client: int = 600
    """New sessions one address may open per minute."""
    max_message_mb: float = 4.0
    """Longer WebSocket messages are answered ACTION_TOO_LARGE and the connection closed (1009)."""
    max_body_mb: float = 4.0
    """Longer HTTP request bodies are answered 413."""
    token: str = ""
    """A shared secret every client must send (Authorization: Bearer <token>); empty: $RUBRICGYM_SERVE_TOKEN, else none."""
    workers: int = 1
    """Server processes sharing the port (uvicorn's workers); a connection stays with the process that
    accepted it, and each process holds ceil(max-sessions / workers) sessions."""
    log_level: str = "warning"


@recipe(name="serve", config=ServeRecipe, positional=("env.env",),
        help="serve a registered id (base or judged) as an OpenEnv environment server")
def run_serve(config: ServeRecipe) -> int:
    import uvicorn

    from rubricgym.openenv import TOKEN_ENV
    from rubricgym.openenv.server import SERVE_APP_ENV, make_app, serve_app_json
    from rubricgym.openenv.sessions import ServeLimits

    env_id = config.env.env_id()
    if config.workers < 1:
        raise SystemExit(f"--workers must be at least 1, got {config.workers}")
    limits = ServeLimits(max_sessions=-(-config.max_sessions // config.workers), idle_timeout_s=config.idle_timeout or None,
                         max_sessions_per_client=config.max_sessions_per_client or None,
                         sessions_per_minute_per_client=config.sessions_per_minute_per_client,
                         max_message_bytes=int(config.max_message_mb * 2**20), max_body_bytes=int(config.max_body_mb * 2**20),
                         token=config.token or os.environ.get(TOKEN_ENV) or None)
    env_kwargs = {**config.env.env_kwargs, **judge_kwargs(env_id, config.judge)}
    url = f"http://{config.host}:{config.port}"
    print(f"serving {env_id} over OpenEnv at {url} (WebSocket sessions at /ws, at most {config.max_sessions}"
          f"{f' in {config.workers} processes' if config.workers > 1 else ''}"
          f"{'; clients must send the token' if limits.token else ''}; gym.make('OpenEnv-v0', url='{url}') plays it)", flush=True)
    # the transport refuses frames far over the app's limit itself; between the two the app answers
    # ACTION_TOO_LARGE and closes with 1009
    options = {"host": config.host, "port": config.port, "log_level": config.log_level, "ws_max_size": 4 * limits.max_message_bytes}
    if config.workers == 1:
        uvicorn.run(make_app(env_id, limits=limits, **env_kwargs), **options)
    else:  # each worker process builds the same app from the environment (uvicorn needs an import string)
        os.environ[SERVE_APP_ENV] = serve_app_json(env_id, env_kwargs, limits)
        uvicorn.run("rubricgym.openenv.server:app_from_environ", factory=True, workers=config.workers, **options)
    return 0


@dataclass(kw_only=True)
class ViewRecipe:
    """``rubricgym view``: a self-contained HTML report."""

    source: str
    """A `rubricgym train` output folder, or the JSONL of `rubricgym judge --output`."""
    output: str | None = None
    """Where to write the HTML (default: report.html in the run folder)."""


@recipe(name="view", config=ViewRecipe, positional=("source",), short={"output": "-o"},
        help="write a self-contained HTML report of a run folder or a judged JSONL file")
def run_view(config: ViewRecipe) -> int:
    from rubricgym.app.view import render

    path = render(config.source, config.output)
    print(f"wrote {path} (open it in a browser; it needs no server or network)")
    return 0


@dataclass
class EnvsRecipe:
    """``rubricgym envs``: the registered ids."""


@recipe(name="envs", config=EnvsRecipe, help="list the registered environment ids")
def run_envs(config: EnvsRecipe) -> int:
    from rubricgym.registration import ENVS, default_env

    # the default family first (the ids runs use when they name none), then registration order
    default = default_env()
    envs = sorted(ENVS.values(), key=lambda env: (env.base or env.id) != default)
    width = max(len(env.id) for env in envs)
    for env in envs:
        print(f"{env.id:<{width}}  {env.summary}")
    return 0


@dataclass(kw_only=True)
class DataRecipe:
    """``rubricgym data``: the public datasets envs read by name."""

    action: Literal["list", "fetch"]
    """list, or fetch the named datasets' pinned upstream files."""
    names: tuple[str, ...] = ("all",)
    """Dataset names (`rubricgym data list`), or all."""
    dest: str | None = None
    """Data folder to write (default: $RUBRICGYM_DATA_DIR, else ~/.cache/rubricgym/data)."""
    dry_run: bool = False
    """Say what would be fetched, under which licence, to where."""


@recipe(name="data", config=DataRecipe, positional=("action", "names"),
        help="list the public datasets envs read by name, or fetch their pinned upstream files")
def run_data(config: DataRecipe) -> int:
    from rubricgym.app import llmbar
    from rubricgym.data import KNOWN_DATASETS, DatasetFetchError, DatasetLoadError, fetch_dataset, fetch_plan, find_data_file

    llmbar.register()
    if config.action == "list":
        width = max(len(name) for name in KNOWN_DATASETS)
        for name, dataset in sorted(KNOWN_DATASETS.items()):
            found = find_data_file(dataset.file) if dataset.file else None
            where = str(found) if found else ("fetchable" if dataset.urls else f"hub only: {dataset.hub_id}")
            print(f"{name:<{width}}  {where}   licence: {dataset.licence or '-'}")
        return 0
    names = [n for n, d in sorted(KNOWN_DATASETS.items()) if d.urls] if list(config.names) in ([], ["all"]) else list(config.names)
    dest = Path(config.dest) if config.dest else None
    status = 0
    for name in names:
        try:
            print(fetch_plan(name, dest))
            if not config.dry_run:
                print(f"  wrote {fetch_dataset(name, dest)}")
        except DatasetFetchError as err:
            print(f"  not fetched: {err.reason} (offline? nothing was written)", file=sys.stderr)
            status = 2
        except DatasetLoadError as err:
            print(f"error: {err}", file=sys.stderr)
            status = 2
    return status
