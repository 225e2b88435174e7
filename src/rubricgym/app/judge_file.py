"""``rubricgym judge``'s files: the trajectories it reads and the judged group it writes."""

from __future__ import annotations

import json
from pathlib import Path


def read_trajectories(path: str) -> tuple[list[str], list[list[dict]], list | None]:
    """JSONL rows: a message list, or {"id": ..., "messages": [...], "tools": [...]}."""
    if not Path(path).is_file():
        raise SystemExit(f"{path}: no such file (expected JSONL: one message list, or {{id, messages, tools}}, per line)")
    labels, trajectories, tools = [], [], None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise SystemExit(f"{path}:{number}: not valid JSON ({err.msg})")
            if isinstance(row, dict):
                messages = row.get("messages")
                labels.append(str(row.get("id", f"#{len(labels) + 1}")))
                tools = tools or row.get("tools")
            else:
                messages = row
                labels.append(f"#{len(labels) + 1}")
            from rubricgym.spaces import ChatSpace

            if not ChatSpace().contains(messages):
                raise SystemExit(f"{path}:{number}: expected a list of chat messages (role/content dicts)")
            trajectories.append(messages)
    if not trajectories:
        raise SystemExit(f"{path}: no trajectories")
    return labels, trajectories, tools


def write_judged(path: str, labels: list[str], trajectories: list[list[dict]], tools: list | None, result, judge_name: str) -> None:
    """``rubricgym judge --output``: the judged group as one ``groups.jsonl`` row (``rubricgym view`` reads it)."""
    from rubricgym.agents.logs import group_row
    from rubricgym.records import Group, Trajectory

    members = [Trajectory(messages=messages, metadata={"judged": {
        "ruler_score": float("nan") if score is None else score, "ruler_explanation": why, "ruler_failed": result.failed,
        "scorer": "ruler", "group": {"ruler_error": result.error, "judge": judge_name, "tools": tools}}})
        for messages, score, why in zip(trajectories, result.scores, result.explanations)]
    row = group_row(Group(task_id=Path(path).stem, trajectories=members), None, f"rubricgym judge ({judge_name})", labels)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
