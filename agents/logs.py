"""Training logs: one JSON row per event in ``metrics.jsonl``, TensorBoard scalars when it is
installed, and the reward-curve PNG."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


class MetricsLog:
    """Appends rows to ``<out>/metrics.jsonl`` (and TensorBoard); keeps them for the plot."""

    def __init__(self, out: Path, history: list[dict[str, float]] | None = None):
        self.out = out
        self.history: list[dict[str, float]] = list(history or [])
        self._tensorboard: Any = None

    def restore(self, history: list[dict[str, float]]) -> None:
        """Go back to a checkpoint's rows: a resumed run re-logs what came after, so those rows
        are dropped from ``metrics.jsonl`` rather than written twice."""
        self.history = list(history)
        (self.out / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in self.history))

    def log(self, stats: dict[str, float]) -> None:
        self.history.append(stats)
        with open(self.out / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(stats) + "\n")
        if self._tensorboard is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tensorboard = SummaryWriter(str(self.out / "tensorboard"))
            except Exception:  # tensorboard not installed: JSONL and the PNG still have everything
                self._tensorboard = False
        if self._tensorboard:
            for key, value in stats.items():
                if isinstance(value, (int, float)) and key != "step" and math.isfinite(value):
                    self._tensorboard.add_scalar(key, value, int(stats.get("step", 0)))

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
