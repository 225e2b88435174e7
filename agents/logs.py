"""Training logs: one JSON row per event in ``metrics.jsonl``, TensorBoard scalars when it is
installed, the reward-curve PNG, and ``groups.jsonl``: what happened in sampled groups (the
trajectories, per-turn rewards, reward components, what the judge said), which
``rubricgym view`` turns into a report."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np


REPORT_TARGETS = ("tensorboard", "wandb", "none")


def check_report_to(report_to: tuple[str, ...]) -> None:
    """Refuse unknown targets, and ``wandb`` without the package, before any work."""
    import importlib.util

    unknown = set(report_to) - set(REPORT_TARGETS)
    if unknown:
        raise ValueError(f"report_to: unknown {sorted(unknown)}; choose from {', '.join(REPORT_TARGETS)}")
    if "wandb" in report_to and importlib.util.find_spec("wandb") is None:
        raise ImportError("report_to=('wandb',) needs Weights & Biases: pip install 'rubricgym[wandb]' "
                          "(WANDB_MODE=offline logs without an account)")


class MetricsLog:
    """Appends rows to ``<out>/metrics.jsonl``, and to TensorBoard and / or Weights & Biases
    (``report_to``, TRL's convention); keeps them for the plot."""

    def __init__(self, out: Path, history: list[dict[str, float]] | None = None,
                 report_to: tuple[str, ...] = ("tensorboard",), run_config: dict[str, Any] | None = None):
        check_report_to(report_to)
        self.out, self.report_to, self.run_config = out, report_to, run_config or {}
        self.history: list[dict[str, float]] = list(history or [])
        self._tensorboard: Any = None if "tensorboard" in report_to else False
        self._wandb: Any = None if "wandb" in report_to else False

    def restore(self, history: list[dict[str, float]]) -> None:
        """Go back to a checkpoint's rows: a resumed run re-logs what came after, so those rows
        are dropped from ``metrics.jsonl`` rather than written twice."""
        self.history = list(history)
        (self.out / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in self.history))

    def log(self, stats: dict[str, float]) -> None:
        self.history.append(stats)
        with open(self.out / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(stats) + "\n")
        if self._tensorboard is None:  # imported on first use
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tensorboard = SummaryWriter(str(self.out / "tensorboard"))
            except Exception:  # tensorboard not installed: JSONL and the PNG still have everything
                self._tensorboard = False
        scalars = {k: v for k, v in stats.items() if isinstance(v, (int, float)) and k != "step" and math.isfinite(v)}
        if self._tensorboard:
            for key, value in scalars.items():
                self._tensorboard.add_scalar(key, value, int(stats.get("step", 0)))
        if self._wandb is None:
            import wandb

            self._wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", "rubricgym"), dir=str(self.out),
                                     config=self.run_config)
        if self._wandb:
            self._wandb.log(scalars, step=int(stats.get("step", 0)))

    def close(self) -> None:
        if self._wandb:
            self._wandb.finish()
            self._wandb = None

    def plot(self, path: Path, title: str) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        rows = [h for h in self.history if "reward" in h]
        evals = [h for h in self.history if "eval_accuracy" in h]
        fig, ax = plt.subplots(figsize=(7, 4))
        if rows:
            steps = [r["step"] for r in rows]
            rewards = [r["reward"] for r in rows]
            ax.plot(steps, rewards, alpha=0.35, label="training reward")
            window = max(1, len(rewards) // 15)
            smooth = np.convolve(rewards, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, label=f"training reward ({window}-step mean)")
        if evals:
            ax2 = ax.twinx()
            ax2.plot([e["step"] for e in evals], [e["eval_accuracy"] for e in evals], "o-", color="black", label="held-out accuracy")
            ax2.set_ylim(0, 1.05)
            ax2.set_ylabel("held-out accuracy")
            ax2.legend(loc="lower right")
        ax.set_xlabel("step")
        ax.set_ylabel("reward")
        ax.set_title(title)
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


#: the row format of ``groups.jsonl`` (and of ``rubricgym judge --output``); bump on changes
GROUP_SCHEMA_VERSION = 1
MAX_MESSAGE_CHARS = 4_000
"""Longer message contents are cut in the log (a report stays readable and bounded)."""


def _cut(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_MESSAGE_CHARS:
        return text[:MAX_MESSAGE_CHARS] + f" [... {len(text) - MAX_MESSAGE_CHARS:,} more characters]"
    return text


def group_row(group: Any, step: int | None, source: str, labels: list[str] | None = None) -> dict[str, Any]:
    """One ``groups.jsonl`` row from a :class:`~rubricgym.records.Group` (JSON data only)."""
    from rubricgym.records import to_jsonable

    trajectories = []
    for index, trajectory in enumerate(group.trajectories):
        judged = dict(trajectory.metadata.get("judged") or {})
        judged.pop("group", None)  # the group's own judgement is written once, below, not per member
        trajectories.append({
            "id": labels[index] if labels else trajectory.id,
            "messages": [{**m, "content": _cut(m.get("content"))} for m in trajectory.messages],
            "reward": trajectory.reward,
            "reward_components": trajectory.reward_components,
            "turns": [{"role": t.info.get("role", "agent"), "reward": t.reward, "error": t.info.get("error")}
                      for t in trajectory.transitions],
            "correct": None if trajectory.episode is None else trajectory.episode.correct,
            "judged": judged,
        })
    first = group.trajectories[0].metadata.get("judged") if group.trajectories else None
    # the task's reference answer (never shown to the agent): what reference-guided judges read
    reference = next((t.episode.reference for t in group.trajectories if t.episode and t.episode.reference is not None), None)
    return to_jsonable({"schema": GROUP_SCHEMA_VERSION, "kind": "group", "source": source, "step": step,
                        "task_id": group.task_id, "reference": reference, "scorer": (first or {}).get("scorer"),
                        "group_info": (first or {}).get("group", {}), "trajectories": trajectories})


class GroupLog:
    """Appends sampled groups to ``<out>/groups.jsonl`` (``per_step`` groups a step; -1: all)."""

    def __init__(self, out: Path, per_step: int = 2):
        self.path, self.per_step = out / "groups.jsonl", per_step

    def log(self, groups: list[Any], step: int, source: str = "train") -> None:
        chosen = groups if self.per_step < 0 else groups[: self.per_step]
        if not chosen:
            return
        with open(self.path, "a") as handle:
            for group in chosen:
                handle.write(json.dumps(group_row(group, step, source)) + "\n")

    def restore(self, step: int) -> None:
        """Drop rows of steps after ``step`` (a resumed run logs them again)."""
        if not self.path.is_file():
            return
        kept, torn = [], []
        for number, line in enumerate(self.path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                row_step = row.get("step") or 0
                if row_step < step:
                    kept.append(line)
            except (ValueError, AttributeError, TypeError):  # a row cut by a kill during its write
                torn.append(number)
        if torn:
            warnings.warn(f"{self.path}: dropped {len(torn)} unreadable row(s) (line {', '.join(map(str, torn[:5]))}"
                          f"{', ...' if len(torn) > 5 else ''}), most likely cut by a kill during the write", stacklevel=2)
        self.path.write_text("".join(row + "\n" for row in kept), encoding="utf-8")
