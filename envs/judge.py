"""``JudgeGroup-v0``: train a judge. Each task is a recorded group of trajectories with a gold
order; the observation is exactly the prompt a RULER judge receives for that group; the action
is the judge's reply (``{"scores": [{"trajectory_id": "t1", "score": 0.9}, ...]}``); the reward is
the share of the group's pairs that the scores order as the gold does (a tie counts half), or
``format_penalty`` when the reply is not a valid score list for exactly the group's ids.

Groups come from ``groups.jsonl`` rows (``rubricgym train`` logs, ``rubricgym judge --output``,
:func:`rubricgym.app.judge_data.record_groups`): the gold of a trajectory is its teacher's
``ruler_score`` where every member has one, else its verified ``correct`` flag, else its
reward. LLMBar-format files (rows of ``input``, ``output_1``, ``output_2``, ``label``) are
groups of two. ``groups="math"`` is the built-in set: groups of four answers of the default model
to level-1 generated sums, labelled by the verifier (``split="train"`` from the generator's
train tasks, ``"test"`` from its test tasks; made by ``rubricgym judge-data``).

This family reads RULER's prompt format from :mod:`rubricgym.judges.ruler` (the one place where
an env knows a judge: its task is to be one); it calls no judge.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> env = gym.make("JudgeGroup-v0", groups=[{"task_id": "g", "trajectories": [
    ...     {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}], "correct": True},
    ...     {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "5"}], "correct": False}]}])
    >>> obs, info = env.reset(seed=0)
    >>> env.step('{"scores": [{"trajectory_id": "t1", "score": 1}, {"trajectory_id": "t2", "score": 0}]}')[1]
    1.0
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rubricgym.data import read_file
from rubricgym.judges.base import pair_agreement
from rubricgym.chatenv import ChatEnv, Score, TrainingDefaults, check_choice, ChatEnvConfig, knob_range
from rubricgym.judges.ruler import (RulerConfig, RulerResponse, build_judge_messages, check_response_ids, pointwise_messages,
                                    with_reference)
from rubricgym.llm.jsonutil import JSONExtractionError, extract_json
from rubricgym.registration import register_family
from rubricgym.tools import ParsedAction

DATA = Path(__file__).resolve().parent / "judge_data"
BUILT_IN = {"math": "math_level1_{split}.jsonl"}


def groups_path(groups: str | Path, split: str = "train") -> Path:
    """A built-in set's file for ``split`` (``"math"``), else ``groups`` as a path."""
    return DATA / BUILT_IN[groups].format(split=split) if groups in BUILT_IN else Path(groups)

#: the specification a judge scores LLMBar outputs against (LLMBar has no system prompt; its
#: rule is "the output that follows the instruction wins")
LLMBAR_SPECIFICATION = ("You are a helpful assistant. Follow the user's instruction precisely and honestly: do exactly "
                        "what it asks, no more and no less.")


@dataclass
class JudgeGroupConfig(ChatEnvConfig):
    """Every knob of :class:`JudgeGroupEnv`."""

    groups: str | list = "math"
    """``"math"`` (built-in), a path (``groups.jsonl`` rows or an LLMBar ``.json``), or a list of rows."""
    split: str = "train"
    """Of the built-in set: ``train`` or ``test`` (groups of disjoint generator tasks)."""
    gold: str = "auto"
    """Which field is the gold: ``auto`` (a teacher's ``ruler_score`` where every member has one,
    else ``correct``, else ``reward``), ``judged``, ``correct`` or ``reward``."""
    order: str = "recorded"
    """Presentation order of the members: ``recorded``, ``reversed`` (position bias is the
    difference), or ``shuffled`` (seeded by the task id)."""
    ruler: dict[str, Any] = field(default_factory=lambda: {"explanation_max_chars": 0})
    """:class:`~rubricgym.judges.ruler.RulerConfig` knobs of the prompt (rubric, share_prefix,
    explanation_max_chars ...): train with the settings the judge will be used with."""
    format_penalty: float = -0.5
    """Reward of a reply that is not a valid score list (below a reversed order's 0)."""
    max_groups: int = 0
    """Keep the first k groups (0: all)."""
    max_action_chars: int = field(default=20_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error."""
    pointwise: bool = False
    """Each member is its own task: the observation is RULER's prompt for that one member (what
    ``RulerConfig(scoring="pointwise")`` sends), the reward ``1 - |score - gold|`` with the gold
    scaled to [0, 1] within its group. A judge trained so is used with ``scoring="pointwise"``."""
    reference: bool = False
    """Reference-guided judging (as ``<Family>RulerRef-v0`` judges): the prompt's rubric names the
    group's reference answer (each row's ``reference``; rows without one are refused). A judge
    trained so is used with the ``ruler_ref`` scheme."""


@dataclass(frozen=True)
class JudgeTask:
    id: str
    trajectories: tuple[tuple[dict[str, Any], ...], ...]
    gold: tuple[float, ...]
    tools: tuple[dict[str, Any], ...] | None = None
    reference: str | None = None


def member_tasks(task: JudgeTask) -> list[JudgeTask]:
    """A group's members as tasks of one, each with its gold scaled to [0, 1] within the group.

    Examples:
        >>> group = JudgeTask("g", (({"role": "assistant", "content": "4"},), ({"role": "assistant", "content": "5"},)), (1.0, -1.0))
        >>> [(t.id, t.gold) for t in member_tasks(group)]
        [('g/t1', (1.0,)), ('g/t2', (0.0,))]
    """
    low, high = min(task.gold), max(task.gold)
    return [JudgeTask(f"{task.id}/t{i + 1}", (trajectory,), ((gold - low) / (high - low),), task.tools, task.reference)
            for i, (trajectory, gold) in enumerate(zip(task.trajectories, task.gold))]


def llmbar_trajectories(row: dict[str, Any], gold_first: bool) -> list[list[dict[str, str]]]:
    """An LLMBar pair as a group of two conversations, the gold output first or second."""
    outputs = [row["output_1"], row["output_2"]]
    gold = int(row["label"]) - 1
    order = [gold, 1 - gold] if gold_first else [1 - gold, gold]
    return [[{"role": "system", "content": LLMBAR_SPECIFICATION}, {"role": "user", "content": row["input"]},
             {"role": "assistant", "content": outputs[k]}] for k in order]


def _gold_of(members: list[dict[str, Any]], gold: str) -> list[float] | None:
    judged = [(m.get("judged") or {}).get("ruler_score") for m in members]
    teacher_ok = all(isinstance(s, (int, float)) and s == s for s in judged)
    if gold == "judged" or (gold == "auto" and teacher_ok):
        return [float(s) for s in judged] if teacher_ok else None
    if gold == "correct" or (gold == "auto" and all(m.get("correct") is not None for m in members)):
        return [float(bool(m.get("correct"))) for m in members] if all(m.get("correct") is not None for m in members) else None
    rewards = [m.get("reward") for m in members]
    return [float(r) for r in rewards] if all(isinstance(r, (int, float)) for r in rewards) else None


def rows_to_tasks(rows: list[dict[str, Any]], gold: str = "auto", where: str = "groups") -> list[JudgeTask]:
    """Judge tasks from ``groups.jsonl`` or LLMBar rows; groups whose members all share one gold
    carry no order and are left out; identical members are judged once (as RULER does)."""
    tasks = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise ValueError(f"{where} row {number}: expected a JSON object, got {type(row).__name__}")
        if {"input", "output_1", "output_2", "label"} <= set(row):
            if row["label"] not in (1, 2):
                raise ValueError(f"{where} row {number}: an LLMBar label must be 1 or 2, got {row['label']!r}")
            tasks.append(JudgeTask(f"llmbar-{number}", tuple(tuple(t) for t in llmbar_trajectories(row, True)), (1.0, 0.0)))
            continue
        members = row.get("trajectories")
        if not isinstance(members, list) or not all(isinstance(m, dict) and isinstance(m.get("messages"), list)
                                                   for m in members):
            raise ValueError(f"{where} row {number}: expected 'trajectories', a list of {{messages, correct | reward | "
                             "judged}} objects (a groups.jsonl row), or an LLMBar row")
        golds = _gold_of(members, gold)
        if golds is None:
            raise ValueError(f"{where} row {number}: not every trajectory has a {gold} gold")
        unique: dict[str, int] = {}
        trajectories, unique_gold = [], []
        for member, value in zip(members, golds):
            key = json.dumps(member["messages"], sort_keys=True, default=str)
            if key not in unique:
                unique[key] = len(trajectories)
                trajectories.append(tuple(member["messages"]))
                unique_gold.append(value)
        if len(set(unique_gold)) < 2:
            continue
        tools = (row.get("group_info") or {}).get("tools")
        reference = row.get("reference")
        tasks.append(JudgeTask(str(row.get("task_id", f"group-{number}")) + f"#{number}", tuple(trajectories),
                               tuple(unique_gold), tuple(tools) if tools else None,
                               None if reference is None else str(reference)))
    return tasks


class JudgeGroupEnv(ChatEnv):
    """Judge a recorded group: reward = pairwise agreement of the scores with the gold order."""

    training = TrainingDefaults(held_out={"split": "test"}, group_size=4, groups_per_step=4, max_new_tokens=64,
                                reward_name="pairwise")

    config_class = JudgeGroupConfig

    def setup(self) -> list[JudgeTask]:
        cfg = self.config
        check_choice("split", cfg.split, ("train", "test"))
        check_choice("gold", cfg.gold, ("auto", "judged", "correct", "reward"))
        check_choice("order", cfg.order, ("recorded", "reversed", "shuffled"))
        self.ruler = replace(RulerConfig(), **cfg.ruler)
        if isinstance(cfg.groups, list):
            rows, where = cfg.groups, "groups"
        else:
            path = groups_path(cfg.groups, cfg.split)
            rows, where = read_file(path), (path.name if cfg.groups in BUILT_IN else str(cfg.groups))
        tasks = rows_to_tasks(rows, cfg.gold, where)[: cfg.max_groups or None]
        if not tasks:
            raise ValueError(f"{where}: no group with two members of different gold (nothing to order)")
        if cfg.reference and any(task.reference is None for task in tasks):
            missing = next(task.id for task in tasks if task.reference is None)
            raise ValueError(f"{where}: reference=True needs each row's 'reference' (the task's reference answer); "
                             f"group {missing} has none")
        if cfg.pointwise:
            tasks = [member for task in tasks for member in member_tasks(task)]
        return tasks

    def presentation(self, task: JudgeTask) -> list[int]:
        """The order in which the members are shown (ids t1, t2 ... follow the member index)."""
        order = list(range(len(task.trajectories)))
        if self.config.order == "reversed":
            order.reverse()
        elif self.config.order == "shuffled":
            random.Random(task.id).shuffle(order)
        return order

    def ids(self, task: JudgeTask) -> list[str]:
        return [f"t{i + 1}" for i in range(len(task.trajectories))]

    def ruler_config(self, task: JudgeTask) -> RulerConfig:
        """RULER's settings for ``task``'s prompt (with its reference when judging is reference-guided)."""
        return with_reference(self.ruler, task.reference) if self.config.reference else self.ruler

    def first_messages(self, task: JudgeTask, options: dict[str, Any]) -> list[dict[str, Any]]:
        tools = list(task.tools) if task.tools else None
        if self.config.pointwise:
            return pointwise_messages(list(task.trajectories[0]), self.ruler_config(task), tools)
        return build_judge_messages([list(t) for t in task.trajectories], self.ids(task), self.presentation(task),
                                    self.ruler_config(task), tools)

    def task_info(self) -> dict[str, Any]:
        return {"gold": list(self.task.gold)}

    def score(self, final: ParsedAction | None) -> Score:
        ids = self.ids(self.task)
        try:
            reply = RulerResponse.model_validate(extract_json(final.content if final else ""))
            problem = check_response_ids(ids)(reply)
        except (JSONExtractionError, ValueError) as err:
            problem = str(err).splitlines()[0][:200]
        if problem:
            return Score(reward=self.config.format_penalty, components={"pairwise": 0.0, "format": 0.0}, correct=False,
                         info={"judge_error": problem})
        by_id = {s.trajectory_id: min(1.0, max(0.0, float(s.score))) for s in reply.scores}
        if self.config.pointwise:
            agreement = 1.0 - abs(by_id["t1"] - self.task.gold[0])
            return Score(reward=agreement, components={"agreement": agreement, "format": 1.0}, correct=agreement >= 0.5,
                         info={"judge_scores": [by_id["t1"]]})
        agreement = pair_agreement([by_id[i] for i in ids], list(self.task.gold))
        return Score(reward=agreement, components={"pairwise": agreement, "format": 1.0}, correct=agreement == 1.0,
                     info={"judge_scores": [by_id[i] for i in ids]})


def register() -> None:
    """``JudgeGroup-v0`` (no judged variants: a judge of judges is not what it is for)."""
    register_family("JudgeGroup", JudgeGroupEnv, derived=False)
