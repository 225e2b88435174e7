"""RLCER's cold start, as data: rubric-writing rows and verifier rows built from recorded groups
(``rubricgym judge-data`` output, or the built-in math groups) by the reference teacher of
:mod:`rubricgym.judges.checkable`, in TRL's prompt-completion format for ``rubricgym sft``.

* **rubricator rows**: the rubricator's exact prompt (the task and one recorded response, as
  :class:`~rubricgym.wrappers.rubrics.RubricatorTurn` shows it) -> the teacher's rubric JSON;
* **verifier rows**: the verifier's exact prompt (task, response, numbered items) -> its
  ``{"satisfied": [...]}`` reply, each verdict decided by program (checkable items only), with
  the teacher's items and distractors (near-miss answers, the response's own last number) so
  that about half the verdicts are "no".

The paper (RLCER) cold-starts its rubricator on about 40k distilled examples and trains its
verifier on distilled data; here the teacher knows the reference answer and the task's
structure, so every label can be checked.

Examples:
    >>> rows = [{"task_id": "t", "trajectories": [{"messages": [
    ...     {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5. \\\\boxed{5}"}]}]}]
    >>> row = rubricator_rows(rows, {"t": "5"})[0]
    >>> json.loads(row["completion"][0]["content"])["items"][0]["description"]
    'The response contains "\\\\boxed{5}"'
    >>> json.loads(verifier_rows(rows, {"t": "5"})[0]["completion"][0]["content"])["satisfied"].count("yes") >= 3
    True
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Iterable

from rubricgym.spaces import last_reply
from rubricgym.judges.checkable import item_truth, reference_rubric
from rubricgym.judges.rlcer import (RUBRICATOR_SYSTEM, RUBRICATOR_USER, VERIFIER_SYSTEM, VERIFIER_USER, RubricItem,
                                    rubricator_messages, verifier_messages)

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def group_references(rows: Iterable[dict[str, Any]], env_id: str, env_kwargs: dict[str, Any] | None = None) -> dict[str, str]:
    """Each group's reference answer, from the env that recorded it (``reset(options={"task_id"})``)."""
    import gymnasium as gym

    env = gym.make(env_id, **(env_kwargs or {}))
    references: dict[str, str] = {}
    try:
        for row in rows:
            task_id = str(row["task_id"])
            if task_id not in references:
                env.reset(options={"task_id": task_id})
                reference = env.unwrapped.reference()
                if reference is None:
                    raise ValueError(f"{env_id} has no reference answer for task {task_id!r}: the teacher needs one")
                references[task_id] = str(reference)
    finally:
        env.close()
    return references


def _problem_and_responses(row: dict[str, Any]) -> tuple[str, list[str]]:
    problem, responses = "", []
    for trajectory in row.get("trajectories") or []:
        messages = trajectory.get("messages") or []
        problem = problem or next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        answer = last_reply(messages)
        if answer not in responses:  # identical responses teach the same row twice
            responses.append(answer)
    return problem, responses


def _completion(content: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": content}]


def rubricator_rows(rows: Iterable[dict[str, Any]], references: dict[str, str], answer_format: str = "\\boxed{{{}}}",
                    system: str = RUBRICATOR_SYSTEM, user: str = RUBRICATOR_USER) -> list[dict[str, Any]]:
    """One row per distinct recorded response: its rubricator prompt -> the teacher's rubric."""
    out = []
    for row in rows:
        problem, responses = _problem_and_responses(row)
        rubric = json.dumps({"items": reference_rubric(problem, references[str(row["task_id"])], answer_format)})
        out += [{"prompt": rubricator_messages(problem, response, system, user), "completion": _completion(rubric),
                 "task_id": str(row["task_id"])} for response in responses]
    return out


def _distractors(reference: str, response: str, answer_format: str, rng: random.Random) -> list[dict[str, Any]]:
    """Items a wrong response satisfies: a near-miss answer, and the response's own last number."""
    items = []
    try:
        near = str(int(reference) + rng.choice([-2, -1, 1, 2, 10]))
        items.append({"description": f'The response contains "{answer_format.format(near)}"', "score": 3})
    except ValueError:
        pass
    numbers = _NUMBER.findall(response)
    if numbers and numbers[-1] != reference:
        items.append({"description": f'The response contains "{numbers[-1]}"', "score": 1})
    return items


def verifier_rows(rows: Iterable[dict[str, Any]], references: dict[str, str], answer_format: str = "\\boxed{{{}}}",
                  seed: int = 0, system: str = VERIFIER_SYSTEM, user: str = VERIFIER_USER,
                  items_per_row: int | None = None, balance: bool = False) -> list[dict[str, Any]]:
    """Rows per distinct recorded response: teacher items and distractors, shuffled, with the
    program's verdicts as the reply; all of a response's items in one row, or ``items_per_row``
    per row (a verifier called with ``verifier_items_per_call`` items is trained on as many).
    ``balance`` (one item per row) keeps as many "no" rows as "yes" rows within each item pattern
    (the description with its digits masked: ``The response contains "\\boxed{#}"``), dropping the
    surplus at random: overall about three in four single verdicts are "no", and within a pattern it
    can be all of them (an untrained model never boxes its answer), so a verifier trained on raw
    rows learns to answer from the pattern alone."""
    if balance and items_per_row != 1:
        raise ValueError("balance needs items_per_row=1 (a row of several items has no single verdict)")
    if items_per_row is not None and items_per_row < 1:
        raise ValueError(f"items_per_row must be at least 1, got {items_per_row}")
    rng = random.Random(seed)
    out = []
    for row in rows:
        problem, responses = _problem_and_responses(row)
        reference = references[str(row["task_id"])]
        for response in responses:
            items = reference_rubric(problem, reference, answer_format) + _distractors(reference, response, answer_format, rng)
            rng.shuffle(items)
            size = items_per_row or len(items)
            for chunk in (items[start:start + size] for start in range(0, len(items), size)):
                verdicts = ["yes" if item_truth(str(item["description"]), response) else "no" for item in chunk]
                prompt = verifier_messages(problem, response, [RubricItem(**item) for item in chunk], system, user)
                # the parts of the prompt ride along (TRL ignores extra columns): a probe calls the verifier with them
                out.append({"prompt": prompt, "completion": _completion(json.dumps({"satisfied": verdicts})),
                            "task_id": str(row["task_id"]), "problem": problem, "response": response,
                            "items": [str(item["description"]) for item in chunk]})
    if balance:
        by_side: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in out:
            side = json.loads(row["completion"][0]["content"])["satisfied"][0]
            by_side.setdefault((item_pattern(row["items"][0]), side), []).append(row)
        out = []
        for pattern in sorted({pattern for pattern, _ in by_side}):
            yes, no = by_side.get((pattern, "yes"), []), by_side.get((pattern, "no"), [])
            keep = min(len(yes), len(no))
            out += rng.sample(yes, keep) + rng.sample(no, keep)
    if items_per_row is not None:
        rng.shuffle(out)  # a response's rows apart, so a batch mixes responses and verdicts
    return out


def item_pattern(description: str) -> str:
    """A rubric item's pattern: its digits masked (``... "6 + 7 = 13"`` -> ``... "# + # = #"``)."""
    return _NUMBER.sub("#", description)


def write_rows(rows: list[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path
