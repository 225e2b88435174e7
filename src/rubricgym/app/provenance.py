"""Where a stored result came from: the code (commit, and a hash of uncommitted changes), a hash
of the full config, the versions of the packages that compute it, and the machine (its CPU's
kernel-picking features). A benchmark reuses a stored cell only when the first three and the CPU's
features match its own, so a number made by older code, or by other kernels, is never mixed in.

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


#: CPU features that pick other BLAS / oneDNN kernels, and so other low bits in a run's numbers
KERNEL_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")


@lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """The CPU a result was computed on: its model, the kernel-picking features it has (``isa``) and
    its cores. The same code, config and packages gave another cell on another machine (a 64-task
    cell moved by one task; that machine's features were not recorded, so that the kernel features
    are what differed is inferred, not shown), so a cell records where it was made."""
    import os
    import platform

    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:  # not Linux: the model name alone
        pass
    return {"cpu": model, "isa": [flag for flag in KERNEL_FLAGS if flag in flags], "cores": os.cpu_count()}


def provenance(config: Any) -> dict[str, Any]:
    """``{"commit", "config_hash", "packages", "machine"}`` of a result computed now from ``config``."""
    return {"commit": code_version(), "config_hash": config_hash(config), "packages": package_versions(), "machine": machine()}


def same_provenance(stored: dict[str, Any] | None, current: dict[str, Any]) -> bool:
    """Whether a stored cell may stand for one computed now: commit, config hash and packages all
    equal, and the CPU's kernel features too where both record them (older cells do not)."""
    if not stored:
        return False
    same_kernels = "machine" not in stored or "machine" not in current or stored["machine"].get("isa") == current["machine"].get("isa")
    return same_kernels and all(stored.get(key) == current[key] for key in ("commit", "config_hash", "packages"))
