"""Where a stored result came from: the code (commit, and a hash of uncommitted changes), a hash
of the full config, and the versions of the packages that compute it. A benchmark reuses a stored
cell only when all three match its own, so a number made by older code is never mixed in.

Examples:
    >>> config_hash({"steps": 6, "seeds": [0, 1]}) == config_hash({"seeds": [0, 1], "steps": 6})
    True
    >>> sorted(package_versions())[:2]
    ['numpy', 'peft']
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from functools import lru_cache
from importlib import metadata
from typing import Any

PACKAGES = ("numpy", "peft", "rubricgym", "torch", "transformers", "trl")
"""The packages whose versions can change a result (computation, not plumbing)."""


def config_hash(config: Any) -> str:
    """16 hex digits of a hash of ``config`` (JSON with sorted keys; other objects by ``str``)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def code_version() -> str:
    """The checkout's commit, with ``+dirty:<hash of the diff>`` when tracked files differ from it;
    ``unknown`` outside a git checkout (an installed wheel: its version is in :func:`package_versions`)."""
    from rubricgym.data import CHECKOUT_ROOT as root

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        diff = git("diff", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + (f"+dirty:{hashlib.sha256(diff.encode()).hexdigest()[:12]}" if diff else "")


@lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def provenance(config: Any) -> dict[str, Any]:
    """``{"commit", "config_hash", "packages"}`` of a result computed now from ``config``."""
    return {"commit": code_version(), "config_hash": config_hash(config), "packages": package_versions()}


def same_provenance(stored: dict[str, Any] | None, current: dict[str, Any]) -> bool:
    """Whether a stored cell may stand for one computed now: commit, config hash and packages all equal."""
    return bool(stored) and all(stored.get(key) == current[key] for key in ("commit", "config_hash", "packages"))
