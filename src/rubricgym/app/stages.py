"""Benchmark stages kept on disk: a training stage that an earlier invocation finished is reused
(its ``stage.json`` holds what it measured), so a rerun repeats only what is missing; delete the
folder to retrain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


def work_folder(path: str | Path, fresh: bool) -> Path:
    """A benchmark's stage folder; ``fresh`` (its ``--smoke``) empties it first, so every stage runs."""
    import shutil

    if fresh:
        shutil.rmtree(path, ignore_errors=True)
    return Path(path)


def finished(folder: Path) -> dict[str, Any] | None:
    """The result of a stage finished in ``folder``, or None."""
    path = Path(folder) / "stage.json"
    return json.loads(path.read_text()) if path.is_file() else None


def save_stage(folder: Path, result: dict[str, Any]) -> dict[str, Any]:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "stage.json").write_text(json.dumps(result))
    return result


def stage(folder: Path, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The stage's kept result, else ``run()``'s, kept."""
    return finished(folder) or save_stage(folder, run())
