"""Checkpoints that resume exactly: adapter (or full weights), optimiser, RNG state, step,
config and history, written to a temporary folder and renamed into place, with ``latest``
replaced atomically, so a crash mid-save never leaves a half-written checkpoint behind."""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .policy import Policy, adapter_state


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def plain_config(config: Any) -> Any:
    """A config (dataclasses, dicts, lists) as JSON data; objects such as a judge client become
    their ``repr`` (a checkpoint records what was used, it does not pickle live clients)."""
    if is_dataclass(config) and not isinstance(config, type):
        return {f.name: plain_config(getattr(config, f.name)) for f in fields(config)}
    if isinstance(config, dict):
        return {str(k): plain_config(v) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [plain_config(v) for v in config]
    if config is None or isinstance(config, (str, int, float, bool)):
        return config
    return repr(config)


def save_checkpoint(out: Path, step: int, policy: Policy, trainer_state: dict[str, Any], config: Any) -> Path:
    """Write ``checkpoint-<step>`` under ``out`` (via a temporary folder) and point ``latest`` at it."""
    config = plain_config(config)
    folder = out / f"checkpoint-{step}"
    staging = out / f".checkpoint-{step}.tmp"
    for stale in out.glob(".checkpoint-*.tmp"):  # left by a save that was killed
        shutil.rmtree(stale, ignore_errors=True)
    staging.mkdir(parents=True)
    if policy.has_adapter:
        policy.model.save_pretrained(staging / "adapter")
    else:
        torch.save(policy.model.state_dict(), staging / "model.pt")
    torch.save({**trainer_state, "rng": rng_state(), "step": step, "config": config}, staging / "trainer.pt")
    (staging / "config.json").write_text(json.dumps(config, indent=2, default=str))
    if folder.exists():  # a re-save of this step: move the old one aside atomically, delete it after
        retired = out / f".checkpoint-{step}.old.tmp"
        os.replace(folder, retired)
        os.replace(staging, folder)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, folder)
    marker = out / ".latest.tmp"
    marker.write_text(folder.name)
    os.replace(marker, out / "latest")
    return folder


def load_adapter(policy: Policy, folder: str | Path) -> None:
    """Load a checkpoint's weights (its LoRA adapter, or the full model) into ``policy``."""
    folder = Path(folder)
    if (folder / "adapter").is_dir():
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(policy.model, adapter_state(folder))
    else:
        policy.model.load_state_dict(torch.load(folder / "model.pt"))


def checkpoint_policy_config(folder: str | Path) -> dict[str, Any]:
    """The policy settings a checkpoint was trained with (model, LoRA rank ...), from its config.json."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a checkpoint folder (no config.json)")
    return json.loads(path.read_text()).get("policy", {})


def load_trainer_state(folder: str | Path) -> dict[str, Any]:
    """The trainer state of a checkpoint; its RNG state is restored as a side effect."""
    state = torch.load(Path(folder) / "trainer.pt", weights_only=False)
    set_rng_state(state["rng"])
    return state


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The folder ``latest`` names when it is complete, else the newest complete checkpoint."""
    output_dir = Path(output_dir)
    marker = output_dir / "latest"
    name = marker.read_text().strip() if marker.is_file() else ""
    if name and (output_dir / name / "trainer.pt").is_file():
        return output_dir / name
    complete = [f for f in output_dir.glob("checkpoint-*") if f.name.split("-")[-1].isdigit() and (f / "trainer.pt").is_file()]
    return max(complete, key=lambda f: int(f.name.split("-")[-1]), default=None)
