"""Self-evolving rubrics (RLCER): the policy writes rubrics for its own chain of thought, a
verifier checks every rubric item on every rollout of the group, and only items whose
satisfaction tracks correctness count.

Definitions (RLCER, arXiv 2602.10885), for one group of N rollouts of a task:

* satisfaction ``S[k, n]`` = 1 when the verifier finds item ``k`` satisfied by rollout ``n``;
  correctness ``c[n]`` = 1 when rollout ``n``'s answer is right;
* item ``k`` is **valid** iff ``S[k]`` is not constant and ``corr(S[k], c) > alpha`` (Pearson,
  which for 0/1 vectors is the phi coefficient; default alpha 0.2);
* chain-of-thought reward of rollout ``n`` = min-max normalised sum of the signed scores of the
  valid items it satisfies: ``(sum_k w_k S[k, n] - W_min) / (W_max - W_min)`` over valid items,
  with ``W_min`` the sum of their negative weights and ``W_max`` of their positive ones; in [0, 1];
  0 when no item is valid;
* **reasoner reward** = outcome (+1 / -1) + chain-of-thought reward;
* **rubricator reward** = valid items / items of its rubric (0 for an empty rubric) + format
  (1 when its JSON parses and validates, else 0).

Decisions where the paper is silent (see docs/design.md): when every rollout is right or every
one is wrong, correlation is undefined, so no item is valid (chain-of-thought reward 0,
rubricator validity term 0) and the group is flagged ``degenerate``; a (rubric, rollout)
verification that still fails after retries is left out of that item's correlation and counts
as unsatisfied for the rollout's reward; nothing is dropped.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, Field, ValidationError

from rubricgym.llm import LLM, JSONExtractionError, LLMCallError, extract_json, make_llm

from .ruler import run_sync

# ---------------------------------------------------------------------------------------------
# Rubric schema and prompts


class RubricItem(BaseModel):
    """One checkable criterion with a signed score (negative for what a solution should avoid)."""

    description: str = Field(min_length=3, max_length=500)
    score: float = Field(ge=-10, le=10)


class Rubric(BaseModel):
    """A rubric has 1 to 20 items: an empty one is not a valid rubric (format reward 0)."""

    items: list[RubricItem] = Field(min_length=1, max_length=20)


RUBRICATOR_SYSTEM = """\
You write grading rubrics for step-by-step math solutions. Each rubric item is one concrete, \
checkable property of a solution's reasoning (for example "verifies the result by substituting \
it back" or "states the formula before using it"), with a signed score: positive for what good \
reasoning does, negative for mistakes to avoid. Write items a grader can decide as true or false \
from the solution text alone. Set the bar high: the solution you are shown must score below the \
middle of the rubric's possible range, so ask for more than it did.

Reply with only JSON: {"items": [{"description": "...", "score": <number from -3 to 3>}, ...]} \
with 3 to 6 items."""

RUBRICATOR_USER = "Problem:\n{problem}\n\nA solution attempt:\n{cot}\n\nWrite the rubric."

VERIFIER_SYSTEM = """\
You check whether a math solution satisfies each rubric item. Judge only from the solution text. \
Reply with only JSON: {"satisfied": ["yes" or "no" for each item, in order]}."""

VERIFIER_USER = "Problem:\n{problem}\n\nSolution:\n{cot}\n\nRubric items:\n{items}"


class Verdicts(BaseModel):
    satisfied: list[bool]
    """"yes"/"no" (asked for: lm-format-enforcer 0.11 miscounts arrays of literals such as
    booleans) or true/false; pydantic reads both."""


RUBRIC_SCHEMA = {
    "type": "object", "required": ["items"], "properties": {"items": {
        "type": "array", "minItems": 3, "maxItems": 6, "items": {
            "type": "object", "required": ["description", "score"], "properties": {
                "description": {"type": "string", "minLength": 3, "maxLength": 160},
                "score": {"type": "number"}}}}}}
"""The reply schema a fixed-LLM rubricator is held to (servers and the in-process judge
constrain decoding to it; the policy as rubricator is not constrained, its format is rewarded)."""


def parse_rubric(text: str) -> tuple[Rubric | None, str | None]:
    """Parse a rubricator reply: ``(rubric, None)``, or ``(None, problem)`` (format reward 0).

    Accepts ``{"items": [...]}``, a bare list, or the keys ``rubrics`` / ``criteria``.

    Example:
        >>> parse_rubric('{"items": [{"description": "checks the answer", "score": 2}]}')[0].items[0].score
        2.0
        >>> parse_rubric("no json")[1][:20]
        'no JSON object found'
    """
    try:
        data = extract_json(text)
    except JSONExtractionError as err:
        return None, str(err)
    if isinstance(data, list):
        data = {"items": data}
    if isinstance(data, dict) and "items" not in data:
        for key in ("rubrics", "rubric", "criteria"):
            if isinstance(data.get(key), list):
                data = {"items": data[key]}
                break
    try:
        return Rubric.model_validate(data), None
    except ValidationError as err:
        return None, f"invalid rubric: {err.errors()[0]['msg']} at {err.errors()[0]['loc']}"


# ---------------------------------------------------------------------------------------------
# The reward, exactly as defined above


@dataclass
class RubricSet:
    """One rubric (from one rubricator turn) and its satisfaction over the group."""

    items: list[RubricItem]
    format_ok: bool
    author: int | None = None
    """Group member whose chain of thought was shown (None for an external rubric)."""
    satisfaction: np.ndarray | None = None
    """Shape (items, N): 1 satisfied, 0 not, -1 unknown (verification failed)."""


@dataclass
class RLCERResult:
    reasoner_rewards: np.ndarray
    cot_rewards: np.ndarray
    rubricator_rewards: list[float]
    valid: list[np.ndarray]
    correlations: list[np.ndarray]
    degenerate: bool
    stats: dict[str, float] = field(default_factory=dict)


def phi_correlation(satisfied: np.ndarray, correct: np.ndarray) -> float:
    """Pearson correlation of two 0/1 vectors; NaN when either is constant."""
    if satisfied.std() == 0 or correct.std() == 0:
        return float("nan")
    return float(np.corrcoef(satisfied.astype(float), correct.astype(float))[0, 1])


def rlcer_rewards(rubric_sets: Sequence[RubricSet], correct: Sequence[bool], outcomes: Sequence[float],
                  alpha: float = 0.2, signed_validity: bool = False) -> RLCERResult:
    """The RLCER rewards of one group (see the module docstring for every definition).

    ``signed_validity=True`` (not the paper's rule) tests ``sign(w) * corr > alpha`` instead, so a
    penalty item counts when it is satisfied mostly by wrong rollouts.
    """
    correct = np.asarray(correct, dtype=bool)
    outcomes = np.asarray(outcomes, dtype=float)
    n = len(correct)
    degenerate = bool(correct.all() or not correct.any())
    valid_sets, corr_sets = [], []
    pooled_weights, pooled_satisfied = [], []
    for rubric in rubric_sets:
        k = len(rubric.items)
        satisfaction = rubric.satisfaction if rubric.satisfaction is not None else np.full((k, n), -1)
        valid = np.zeros(k, dtype=bool)
        corrs = np.full(k, np.nan)
        for i in range(k):
            known = satisfaction[i] >= 0
            if degenerate or known.sum() < 2:
                continue
            s = satisfaction[i][known]
            corrs[i] = phi_correlation(s, correct[known])
            signed = np.sign(rubric.items[i].score) * corrs[i] if signed_validity else corrs[i]
            valid[i] = s.std() > 0 and np.isfinite(corrs[i]) and signed > alpha
            if valid[i]:
                pooled_weights.append(rubric.items[i].score)
                pooled_satisfied.append(satisfaction[i] == 1)
        valid_sets.append(valid)
        corr_sets.append(corrs)
    cot = np.zeros(n)
    if pooled_weights:
        weights = np.asarray(pooled_weights)
        satisfied = np.asarray(pooled_satisfied, dtype=float)
        low, high = weights[weights < 0].sum(), weights[weights > 0].sum()
        if high > low:
            cot = (weights @ satisfied - low) / (high - low)
    rubricator = [(float(v.mean()) if len(v) else 0.0) + (1.0 if r.format_ok else 0.0) for r, v in zip(rubric_sets, valid_sets)]
    all_valid = np.concatenate(valid_sets) if valid_sets else np.zeros(0, dtype=bool)
    all_corr = np.concatenate(corr_sets) if corr_sets else np.zeros(0)
    stats = {
        "valid_fraction": float(all_valid.mean()) if len(all_valid) else 0.0,
        "mean_valid_corr": float(all_corr[all_valid].mean()) if all_valid.any() else 0.0,
        "mean_cot_reward": float(cot.mean()),
        "num_items": float(len(all_valid)),
        "format_rate": float(np.mean([r.format_ok for r in rubric_sets])) if rubric_sets else 0.0,
        "degenerate": float(degenerate),
    }
    return RLCERResult(outcomes + cot, cot, rubricator, valid_sets, corr_sets, degenerate, stats)


# ---------------------------------------------------------------------------------------------
# Rubricator and verifier calls


def render_items(items: Sequence[RubricItem]) -> str:
    return "\n".join(f"{i + 1}. {item.description}" for i, item in enumerate(items))


def rubricator_messages(problem: str, cot: str) -> list[dict[str, str]]:
    """The rubricator's conversation: problem and one chain of thought in, rubric JSON out."""
    return [{"role": "system", "content": RUBRICATOR_SYSTEM},
            {"role": "user", "content": RUBRICATOR_USER.format(problem=problem, cot=cot)}]


async def verify_rollout(verifier: LLM, problem: str, cot: str, items: Sequence[RubricItem],
                         max_fixes: int = 2) -> list[bool] | None:
    """One verifier call deciding every item of a rubric on one rollout; None after failures."""
    if not items:
        return []
    messages = [{"role": "system", "content": VERIFIER_SYSTEM},
                {"role": "user", "content": VERIFIER_USER.format(problem=problem, cot=cot, items=render_items(items))}]
    schema = {"type": "object", "required": ["satisfied"], "properties": {"satisfied": {
        "type": "array", "items": {"type": "string", "enum": ["yes", "no"]}, "minItems": len(items), "maxItems": len(items)}}}

    def check(verdicts: Verdicts) -> str | None:
        if len(verdicts.satisfied) != len(items):
            return f"expected {len(items)} values ('yes' or 'no'), one per item, got {len(verdicts.satisfied)}"
        return None

    try:
        verdicts, _ = await verifier.complete_json(messages, Verdicts, check=check, schema=schema, max_fixes=max_fixes,
                                                   max_tokens=32 + 8 * len(items))
    except LLMCallError:
        return None
    return verdicts.satisfied


async def fill_satisfaction(rubric_sets: Sequence[RubricSet], problem: str, cots: Sequence[str], verifier: LLM,
                            max_fixes: int = 2) -> int:
    """Verify every rubric on every rollout (concurrently); returns the number of failed checks."""
    jobs, where = [], []
    for r, rubric in enumerate(rubric_sets):
        rubric.satisfaction = np.full((len(rubric.items), len(cots)), -1, dtype=int)
        if not rubric.items:
            continue
        for n, cot in enumerate(cots):
            jobs.append(verify_rollout(verifier, problem, cot, rubric.items, max_fixes))
            where.append((r, n))
    failures = 0
    for (r, n), verdict in zip(where, await asyncio.gather(*jobs)):
        if verdict is None:
            failures += 1
        else:
            rubric_sets[r].satisfaction[:, n] = np.asarray(verdict, dtype=int)
    return failures


async def write_rubric(rubricator: LLM, problem: str, cot: str, author: int | None,
                       max_tokens: int = 300) -> tuple[RubricSet, str]:
    """A fixed-LLM rubricator turn: returns the rubric set and the raw reply."""
    try:
        completion = await rubricator.complete(rubricator_messages(problem, cot),
                                               {"type": "json_object", "schema": RUBRIC_SCHEMA}, max_tokens=max_tokens)
        text = completion.text
    except LLMCallError as err:
        text = f"(rubricator call failed: {err})"
    rubric, _ = parse_rubric(text)
    return RubricSet(items=rubric.items if rubric else [], format_ok=rubric is not None, author=author), text


# ---------------------------------------------------------------------------------------------
# Evolution tracking and the rubric bank


class RubricBank:
    """Valid rubric items per task, kept across groups (for tracking and for prompt hints).

    Example:
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


# ---------------------------------------------------------------------------------------------
# Environment side: the rubricator's turn as a second role


@dataclass
class RubricConfig:
    """Every RLCER knob."""

    alpha: float = 0.2
    """An item is valid when corr(satisfaction, correctness) exceeds this."""
    signed_validity: bool = False
    """Paper rule (False): corr > alpha for every item. True: sign(weight) * corr > alpha."""
    rubricator: Any = "policy"
    """``"policy"``: the agent writes rubrics in a second turn (``info["role"] = "rubricator"``);
    otherwise a fixed LLM (model string or LLM) writes them."""
    verifier: Any = "local"
    """Model string or LLM deciding each (item, rollout)."""
    api_base: str | None = None
    """OpenAI-compatible server for string verifier / rubricator models."""
    rubrics_per_group: int = 2
    """Fixed-LLM mode: rubrics written per group, each shown a different member's chain of thought."""
    max_fixes: int = 2
    """Times an invalid verifier reply is sent back for a fix."""
    rubricator_max_tokens: int = 300
    """Completion budget of a fixed-LLM rubricator call."""
    rubric_hints: bool = False
    """Append a task's banked valid rubric items to its problem at reset (RLCER's inference hint)."""
    history_size: int = 7
    """Single-env mode: earlier rollouts of the same task that form the group with the new one."""


class RubricatorTurn(gym.Wrapper):
    """Turns the reasoner's final step into a rubricator turn: the agent is shown the problem and
    its own chain of thought and must reply with a rubric (JSON). The episode then terminates
    with the reasoner's held-back outcome reward; ``info`` carries ``role`` ("reasoner" or
    "rubricator"), ``cot``, ``rubric_text`` and the reasoner's final info.

    Example:
        >>> env = RubricatorTurn(gym.make("Math-v0"))  # doctest: +SKIP
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._pending: dict[str, Any] | None = None
        self._stage = "reasoner"

    def reset(self, **kwargs):
        self._pending, self._stage = None, "reasoner"
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "role": "reasoner"}

    def step(self, action):
        if self._stage == "rubricator":
            pending = self._pending
            text = action if isinstance(action, str) else (action.get("content") or "") if isinstance(action, dict) else ""
            obs = pending["rubricator_obs"] + [{"role": "assistant", "content": text}]
            info = {**pending["info"], "role": "rubricator", "cot": pending["cot"], "rubric_text": text}
            if not isinstance(action, (str, dict)):
                info["error"] = f"a rubric must be a reply string, got {type(action).__name__}"
            self._stage = "done"
            return obs, pending["reward"], pending["terminated"], pending["truncated"], info
        if self._stage == "done":
            return self.env.step(action)  # the inner env reports the ended episode
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated):
            return obs, reward, terminated, truncated, {**info, "role": "reasoner"}
        cot = next((m.get("content") or "" for m in reversed(obs) if m["role"] == "assistant"), "")
        problem = info.get("problem", "")
        rubricator_obs = rubricator_messages(problem, cot)
        self._pending = {"reward": reward, "terminated": terminated, "truncated": truncated, "cot": cot,
                         "info": info, "rubricator_obs": rubricator_obs}
        self._stage = "rubricator"
        return rubricator_obs, 0.0, False, False, {**info, "role": "reasoner", "cot": cot, "next_role": "rubricator",
                                                   "reward_components": {}, "reasoner_done": True}


class RubricHints(gym.Wrapper):
    """Appends a task's banked valid rubric items to its problem at reset."""

    def __init__(self, env: gym.Env, bank: RubricBank):
        super().__init__(env)
        self.bank = bank

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        hint = self.bank.hint(str(info.get("task_id")))
        if hint:
            options = {**(kwargs.get("options") or {}), "task_id": info["task_id"], "hint": hint}
            obs, info = self.env.reset(options=options)
            info = {**info, "rubric_hint": hint}
        return obs, info


def trajectory_record(trajectory) -> dict[str, Any]:
    """What RLCER needs of one member, read from its :class:`~rubricgym.records.Trajectory`."""
    final = trajectory.transitions[-1].info if trajectory.transitions else {}
    reasoner_steps = [t for t in trajectory.transitions if t.info.get("role", "reasoner") == "reasoner"]
    info = {"cot": final.get("cot"), "correct": final.get("correct", False), "rubric_text": final.get("rubric_text"),
            "reward_components": trajectory.reward_components, "problem": trajectory.metadata.get("problem", "")}
    messages = reasoner_steps[-1].next_obs if reasoner_steps else trajectory.messages
    return _member_record(info, messages)


def _member_record(info: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    cot = info.get("cot")
    if cot is None:
        cot = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), "")
    return {"cot": cot, "correct": bool(info.get("correct", False)),
            "outcome": float((info.get("reward_components") or {}).get("outcome", 0.0)),
            "rubric_text": info.get("rubric_text"), "problem": info.get("problem", "")}


class _RubricScorer:
    """What the group and single-env wrappers share: clients, bank, tracker, one group's scoring."""

    def __init__(self, config: RubricConfig):
        self.config = config
        self.verifier = make_llm(config.verifier, api_base=config.api_base)
        self.policy_rubricator = isinstance(config.rubricator, str) and config.rubricator == "policy"
        self.rubricator = None if self.policy_rubricator else make_llm(config.rubricator, api_base=config.api_base)
        self.bank = RubricBank()
        self.tracker = RubricTracker()

    async def score(self, task_id: str, members: list[dict[str, Any]]) -> tuple[RLCERResult, list[RubricSet], int]:
        problem = members[0]["problem"]
        cots = [m["cot"] for m in members]
        if self.policy_rubricator:
            rubric_sets = []
            for index, member in enumerate(members):
                if member["rubric_text"] is None:
                    continue
                rubric, _ = parse_rubric(member["rubric_text"])
                rubric_sets.append(RubricSet(items=rubric.items if rubric else [], format_ok=rubric is not None, author=index))
        else:
            # authors spread over the group, so rubrics see different chains of thought
            count = min(len(members), max(1, self.config.rubrics_per_group))
            authors = sorted({int(round(x)) for x in np.linspace(0, len(members) - 1, count)})
            written = await asyncio.gather(*(write_rubric(self.rubricator, problem, cots[a], a,
                                                          self.config.rubricator_max_tokens) for a in authors))
            rubric_sets = [r for r, _ in written]
        failures = await fill_satisfaction(rubric_sets, problem, cots, self.verifier, self.config.max_fixes)
        result = rlcer_rewards(rubric_sets, [m["correct"] for m in members], [m["outcome"] for m in members],
                               self.config.alpha, self.config.signed_validity)
        result.stats["verifier_failures"] = float(failures)
        self.tracker.record(result.stats)
        for rubric, valid, corr in zip(rubric_sets, result.valid, result.correlations):
            self.bank.add(task_id, [it for it, v in zip(rubric.items, valid) if v], [c for c, v in zip(corr, valid) if v])
        return result, rubric_sets, failures


class RubricGroupReward(gym.vector.VectorWrapper):
    """RLCER rewards on each group's terminal step of a group vector env.

    Per member: ``reward`` = reasoner reward, plus the rubricator reward of the rubric it wrote
    (policy mode) so the step reward is the episode return; ``info["role_rewards"]`` splits it,
    and the member's :class:`~rubricgym.records.Trajectory` gets each transition's own reward
    (reasoner turn: reasoner reward; rubricator turn: rubricator reward) for per-role training.
    ``info["reward_components"]`` gains ``cot`` and ``rubricator``; ``info["rubric_stats"]`` holds
    the group's valid fraction, mean valid correlation, mean chain-of-thought reward and items.
    """

    def __init__(self, env: gym.vector.VectorEnv, config: RubricConfig | None = None, scorer: _RubricScorer | None = None):
        super().__init__(env)
        self.config = config or RubricConfig()
        self.scorer = scorer or _RubricScorer(self.config)
        self.bank, self.tracker = self.scorer.bank, self.scorer.tracker
        self.last_rubrics: dict[int, list[RubricSet]] = {}

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        done = infos.get("group_done")
        if done is None:
            return obs, rewards, terminated, truncated, infos
        base = self.env.unwrapped
        mask = np.asarray(infos.get("_group_done", done), dtype=bool) & np.asarray(done, dtype=bool)
        groups = sorted({base.group_of(i) for i in np.flatnonzero(mask)})
        if not groups:
            return obs, rewards, terminated, truncated, infos
        records = {g: [trajectory_record(infos["trajectory"][i]) for i in base.members(g)] for g in groups}

        async def score_all():
            return await asyncio.gather(*(self.scorer.score(str(infos["task_id"][base.members(g)[0]]), records[g])
                                          for g in groups))

        results = run_sync(score_all())
        n = len(rewards)
        rewards = np.asarray(rewards, dtype=np.float64).copy()
        cot = np.full(n, np.nan)
        rubricator = np.full(n, np.nan)
        reasoner = np.full(n, np.nan)
        stats = np.full(n, None, dtype=object)
        for g, (result, rubric_sets, _) in zip(groups, results):
            self.last_rubrics[g] = rubric_sets
            by_author = {r.author: reward for r, reward in zip(rubric_sets, result.rubricator_rewards)}
            for rank, i in enumerate(base.members(g)):
                reasoner[i] = result.reasoner_rewards[rank]
                cot[i] = result.cot_rewards[rank]
                trajectory = infos["trajectory"][i]
                role_rewards = {"reasoner": float(reasoner[i])}
                if self.scorer.policy_rubricator and rank in by_author:
                    rubricator[i] = by_author[rank]
                    role_rewards["rubricator"] = float(rubricator[i])
                rewards[i] = sum(role_rewards.values())
                self._assign_transition_rewards(trajectory, role_rewards)
                trajectory.reward = float(rewards[i])
                trajectory.reward_components.update({"cot": float(cot[i]), **({"rubricator": float(rubricator[i])}
                                                                              if "rubricator" in role_rewards else {})})
                stats[i] = dict(result.stats)
        components = infos.setdefault("reward_components", {})
        components["cot"], components["_cot"] = cot, mask.copy()
        components["rubricator"], components["_rubricator"] = rubricator, mask & np.isfinite(rubricator)
        infos["role_rewards_reasoner"], infos["_role_rewards_reasoner"] = reasoner, mask.copy()
        infos["role_rewards_rubricator"], infos["_role_rewards_rubricator"] = rubricator, mask & np.isfinite(rubricator)
        infos["rubric_stats"], infos["_rubric_stats"] = stats, mask.copy()
        return obs, rewards, terminated, truncated, infos

    @staticmethod
    def _assign_transition_rewards(trajectory, role_rewards: dict[str, float]) -> None:
        """Each role's reward lands on that role's last transition; other transitions get 0."""
        last_of_role: dict[str, Any] = {}
        for transition in trajectory.transitions:
            transition.reward = 0.0
            last_of_role[transition.info.get("role", "reasoner")] = transition
        for role, reward in role_rewards.items():
            if role in last_of_role:
                last_of_role[role].reward = reward


class RubricReward(gym.Wrapper):
    """RLCER for a single env: each finished rollout forms a group with the last
    ``history_size`` finished rollouts of the same task (relative rewards); alone, the group is
    degenerate (reasoner reward = outcome; rubricator reward = format). ``reset(seed=...)`` clears
    the history.
    """

    def __init__(self, env: gym.Env, config: RubricConfig | None = None):
        super().__init__(env)
        self.config = config or RubricConfig()
        self.scorer = _RubricScorer(self.config)
        self.bank, self.tracker = self.scorer.bank, self.scorer.tracker
        self.history: dict[str, deque] = defaultdict(lambda: deque(maxlen=self.config.history_size))
        self._task_id: str | None = None
        self._reasoner_obs: list[dict[str, Any]] = []

    def reset(self, **kwargs):
        if kwargs.get("seed") is not None:
            self.history.clear()
        obs, info = self.env.reset(**kwargs)
        self._task_id = str(info.get("task_id"))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info.get("reasoner_done"):
            self._reasoner_obs = obs
        if not (terminated or truncated) or "the episode has ended" in str(info.get("error", "")):
            return obs, reward, terminated, truncated, info
        record = _member_record(info, obs)
        history = self.history[self._task_id]
        members = list(history) + [record]
        result, rubric_sets, failures = run_sync(self.scorer.score(self._task_id, members))
        history.append(record)
        role_rewards = {"reasoner": float(result.reasoner_rewards[-1])}
        if self.scorer.policy_rubricator and rubric_sets and rubric_sets[-1].author == len(members) - 1:
            role_rewards["rubricator"] = float(result.rubricator_rewards[-1])
        components = dict(info.get("reward_components") or {})
        components["cot"] = float(result.cot_rewards[-1])
        if "rubricator" in role_rewards:
            components["rubricator"] = role_rewards["rubricator"]
        info = {**info, "reward_components": components, "role_rewards": role_rewards, "rubric_stats": result.stats,
                "rubric_group_size": len(members)}
        return obs, float(sum(role_rewards.values())), terminated, truncated, info


# ---------------------------------------------------------------------------------------------
# Registered ids: MathRubric-v0 = Math-v0 (+ rubricator turn) + RLCER reward.

RUBRIC_KNOBS = set(RubricConfig.__dataclass_fields__)


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], RubricConfig]:
    config = RubricConfig(**{k: kwargs.pop(k) for k in list(kwargs) if k in RUBRIC_KNOBS})
    return kwargs, config


def make_rubric_env(base_env: str = "Math-v0", **kwargs: Any) -> gym.Env:
    """Single env (what ``gym.make("MathRubric-v0")`` builds)."""
    env_kwargs, config = _split(dict(kwargs))
    env = gym.make(base_env, disable_env_checker=True, **env_kwargs).unwrapped
    wrapper = RubricReward(env, config)  # built first: it owns the bank the hints read
    inner: gym.Env = env
    if config.rubric_hints:
        inner = RubricHints(inner, wrapper.bank)
    if wrapper.scorer.policy_rubricator:
        inner = RubricatorTurn(inner)
    wrapper.env = inner
    return wrapper


def make_rubric_vector_env(num_envs: int = 1, group_size: int = 8, base_env: str = "Math-v0", **kwargs: Any):
    """Group vector env: members (+ rubricator turn) and :class:`RubricGroupReward`."""
    from .group import GroupVectorEnv

    env_kwargs, config = _split(dict(kwargs))
    env_kwargs.pop("max_episode_steps", None)
    scorer = _RubricScorer(config)

    def make_member() -> gym.Env:
        member: gym.Env = gym.make(base_env, disable_env_checker=True, **env_kwargs)
        if config.rubric_hints:
            member = RubricHints(member, scorer.bank)
        if scorer.policy_rubricator:
            member = RubricatorTurn(member)
        return member

    return RubricGroupReward(GroupVectorEnv([make_member] * num_envs, group_size=group_size), config, scorer)
