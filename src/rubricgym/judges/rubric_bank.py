"""RLCER's evolution tracking and rubric bank: the valid items kept per task across groups (for
logs and for prompt hints), and the running statistics of each group's rubrics."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .rlcer import RubricItem


class RubricBank:
    """Valid rubric items per task, kept across groups (for tracking and for prompt hints).

    Examples:
        >>> from rubricgym.judges.rlcer import RubricItem
        >>> bank = RubricBank()
        >>> bank.add("t1", [RubricItem(description="checks the result", score=2)], [0.6])
        >>> bank.hint("t1")
        'Criteria a strong solution meets:\\n- checks the result'
    """

    def __init__(self, max_items_per_task: int = 8):
        self.max_items = max_items_per_task
        self.items: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)

    def add(self, task_id: str, items: Sequence[RubricItem], correlations: Sequence[float]) -> None:
        bank = self.items[task_id]
        for item, corr in zip(items, correlations):
            entry = bank.setdefault(item.description, {"score": item.score, "corr": 0.0, "count": 0})
            entry["count"] += 1
            entry["corr"] += (float(corr) - entry["corr"]) / entry["count"]
        if len(bank) > self.max_items:  # keep the items that tracked correctness best
            keep = sorted(bank, key=lambda d: -bank[d]["corr"])[: self.max_items]
            self.items[task_id] = {d: bank[d] for d in keep}

    def hint(self, task_id: str) -> str | None:
        """Text listing the task's valid positive items (what a strong solution does), or None."""
        positives = [d for d, e in self.items.get(task_id, {}).items() if e["score"] > 0]
        if not positives:
            return None
        return "Criteria a strong solution meets:\n" + "\n".join(f"- {d}" for d in positives)


@dataclass
class RubricTracker:
    """Per-group evolution statistics, and their running history for training logs."""

    history: list[dict[str, float]] = field(default_factory=list)

    def record(self, stats: dict[str, float]) -> None:
        self.history.append(dict(stats))

    def summary(self, last: int | None = None) -> dict[str, float]:
        rows = self.history[-last:] if last else self.history
        if not rows:
            return {}
        return {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
