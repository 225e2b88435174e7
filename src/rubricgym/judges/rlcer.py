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

This module needs no gym; :mod:`rubricgym.wrappers.rubrics` holds the env-side pieces (the
rubricator turn, hints, and the reward wrappers over :class:`RubricScorer`).

Decisions where the paper is silent (see docs/design.md): when every rollout is right or every
one is wrong, correlation is undefined, so no item is valid (chain-of-thought reward 0,
rubricator validity term 0) and the group is flagged ``degenerate``; a (rubric, rollout)
verification that still fails after retries is left out of that item's correlation and counts
as unsatisfied for the rollout's reward; nothing is dropped.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from rubricgym.llm import LLM, JSONExtractionError, LLMCallError, extract_json, make_llm

from rubricgym.knobs import check_knobs

from .rubric_bank import RubricBank, RubricTracker
from .base import GroupScore, Member, MemberScore
from .checkable import OracleVerifier
from .oracle import is_oracle

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
You write grading rubrics for an AI agent's responses to a task. Each rubric item is one concrete, \
checkable property of a response's reasoning or content (for example "checks the result before \
stating it" or "states the rule it applies"), with a signed score: positive for what a good \
response does, negative for mistakes to avoid. Write items a grader can decide as true or false \
from the response text alone. Set the bar high: the response you are shown must score below the \
middle of the rubric's possible range, so ask for more than it did.

Reply with only JSON: {"items": [{"description": "...", "score": <number from -3 to 3>}, ...]} \
with 3 to 6 items."""

RUBRICATOR_USER = "Task:\n{problem}\n\nA response:\n{cot}\n\nWrite the rubric."

VERIFIER_SYSTEM = """\
You check whether a response to a task satisfies each rubric item. Judge only from the response text. \
Reply with only JSON: {"satisfied": ["yes" or "no" for each item, in order]}."""

VERIFIER_USER = "Task:\n{problem}\n\nResponse:\n{cot}\n\nRubric items:\n{items}"


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


#: 20 items of 500 characters with their JSON: longer replies are not rubrics (format reward 0)
MAX_RUBRIC_CHARS = 16_000


def parse_rubric(text: str) -> tuple[Rubric | None, str | None]:
    """Parse a rubricator reply: ``(rubric, None)``, or ``(None, problem)`` (format reward 0).

    Accepts ``{"items": [...]}``, a bare list, or the keys ``rubrics`` / ``criteria``.

    Examples:
        >>> parse_rubric('{"items": [{"description": "checks the answer", "score": 2}]}')[0].items[0].score
        2.0
        >>> parse_rubric("no json")[1][:20]
        'no JSON object found'
    """
    if len(text) > MAX_RUBRIC_CHARS:
        return None, f"the rubric reply has {len(text):,} characters, over the limit of {MAX_RUBRIC_CHARS:,}"
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
    parsed = sum(r.format_ok for r in rubric_sets)
    checks = np.concatenate([r.satisfaction.ravel() for r in rubric_sets if r.satisfaction is not None] or [np.zeros(0)])
    stats = {
        "valid_fraction": float(all_valid.mean()) if len(all_valid) else 0.0,
        "mean_valid_corr": float(all_corr[all_valid].mean()) if all_valid.any() else 0.0,
        "mean_cot_reward": float(cot.mean()),
        "num_items": float(len(all_valid)),
        "items_per_rubric": float(len(all_valid) / parsed) if parsed else 0.0,  # of the rubrics that parsed
        "format_rate": float(np.mean([r.format_ok for r in rubric_sets])) if rubric_sets else 0.0,
        "degenerate": float(degenerate),
        "unverified_fraction": float(np.mean(checks < 0)) if checks.size else 0.0,
    }
    if not degenerate and len(all_valid):
        # validity is only decidable where correctness varies: a group all right (or all wrong) has
        # no valid item whatever its rubrics say, so a strong policy's valid fraction falls with its errors
        stats["informative_valid_fraction"] = float(all_valid.mean())
    cot_correct = phi_correlation(cot, correct)
    if np.isfinite(cot_correct):  # does the rubric reward track what it stands for? (undefined if either is constant)
        stats["cot_correct_corr"] = cot_correct
    return RLCERResult(outcomes + cot, cot, rubricator, valid_sets, corr_sets, degenerate, stats)


# ---------------------------------------------------------------------------------------------
# Rubricator and verifier calls


def render_items(items: Sequence[RubricItem]) -> str:
    return "\n".join(f"{i + 1}. {item.description}" for i, item in enumerate(items))


def rubricator_messages(problem: str, cot: str, system: str = RUBRICATOR_SYSTEM,
                        user: str = RUBRICATOR_USER) -> list[dict[str, str]]:
    """The rubricator's conversation: the task and one response in, rubric JSON out."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user.format(problem=problem, cot=cot)}]


def verifier_messages(problem: str, cot: str, items: Sequence[RubricItem], system: str = VERIFIER_SYSTEM,
                      user: str = VERIFIER_USER) -> list[dict[str, str]]:
    """The verifier's conversation: the task, one response and the numbered items in, verdicts out."""
    return [{"role": "system", "content": system},
            {"role": "user", "content": user.format(problem=problem, cot=cot, items=render_items(items))}]


async def verify_rollout(verifier: LLM, problem: str, cot: str, items: Sequence[RubricItem],
                         max_fixes: int = 2, system: str = VERIFIER_SYSTEM, user: str = VERIFIER_USER,
                         scoring: str = "sampled") -> list[bool] | None:
    """One verifier call deciding every item of a rubric on one rollout; None after failures.
    ``scoring="probability"`` (the in-process verifier) reads each "yes" / "no" from the next-token
    distribution inside the reply's fixed frame instead of decoding the reply under the schema."""
    if not items:
        return []
    messages = verifier_messages(problem, cot, items, system, user)
    schema = {"type": "object", "required": ["satisfied"], "properties": {"satisfied": {
        "type": "array", "items": {"type": "string", "enum": ["yes", "no"]}, "minItems": len(items), "maxItems": len(items)}}}
    if scoring == "probability":
        try:
            picks = await verifier.choose_sequence(messages, '{"satisfied": ["', ["yes", "no"], len(items), '", "', '"]}',
                                                   schema=schema)
        except (LLMCallError, RuntimeError, ValueError):
            return None
        return [pick == 0 for pick in picks]

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


#: distinct rubric items checked in one verifier call (a group's items are verified together)
ITEMS_PER_CALL = 12


async def fill_satisfaction(rubric_sets: Sequence[RubricSet], problem: str, cots: Sequence[str], verifier: LLM,
                            max_fixes: int = 2, system: str = VERIFIER_SYSTEM, user: str = VERIFIER_USER,
                            items_per_call: int = ITEMS_PER_CALL, scoring: str = "sampled") -> int:
    """Verify every rubric item on every rollout; returns the number of failed verifier calls.

    The group's distinct items (by description) are checked together, at most ``items_per_call``
    per call, once per distinct rollout text, all calls concurrent: rubrics that repeat items (the
    policy's rubrics for one task often do) cost what one does, and an item's verdict on a rollout
    is the same in every rubric that has it. A failed call leaves its items unknown (-1) on that
    rollout. A simulated verifier (:class:`~rubricgym.judges.checkable.OracleVerifier`) decides
    checkable items by program and leaves the others unknown; it makes no calls and never fails.
    """
    descriptions = list(dict.fromkeys(item.description for rubric in rubric_sets for item in rubric.items))
    texts = list(dict.fromkeys(cots))
    verdict: dict[tuple[str, str], int] = {}
    failures = 0
    if isinstance(verifier, OracleVerifier):
        for text in texts:
            for description, value in zip(descriptions, verifier.verdicts(descriptions, text)):
                verdict[description, text] = -1 if value is None else int(value)
    elif descriptions:
        chunks = [descriptions[i:i + items_per_call] for i in range(0, len(descriptions), items_per_call)]
        jobs = [(chunk, text) for text in texts for chunk in chunks]
        results = await asyncio.gather(*(verify_rollout(verifier, problem, text, [RubricItem(description=d, score=1) for d in chunk],
                                                        max_fixes, system, user, scoring) for chunk, text in jobs))
        for (chunk, text), got in zip(jobs, results):
            if got is None:
                failures += 1
                continue
            for description, value in zip(chunk, got):
                verdict[description, text] = int(value)
    for rubric in rubric_sets:
        rubric.satisfaction = np.array([[verdict.get((item.description, cot), -1) for cot in cots] for item in rubric.items],
                                       dtype=int).reshape(len(rubric.items), len(cots))
    return failures


async def write_rubric(rubricator: LLM, problem: str, cot: str, author: int | None,
                       max_tokens: int = 300, system: str = RUBRICATOR_SYSTEM,
                       user: str = RUBRICATOR_USER) -> tuple[RubricSet, str]:
    """A fixed-LLM rubricator turn: returns the rubric set and the raw reply."""
    try:
        completion = await rubricator.complete(rubricator_messages(problem, cot, system, user),
                                               {"type": "json_object", "schema": RUBRIC_SCHEMA}, max_tokens=max_tokens)
        text = completion.text
    except LLMCallError as err:
        text = f"(rubricator call failed: {err})"
    rubric, _ = parse_rubric(text)
    return RubricSet(items=rubric.items if rubric else [], format_ok=rubric is not None, author=author), text


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
    """Model string or LLM deciding each (item, rollout): ``local``, ``local:<checkpoint>`` (a
    verifier trained by ``rubricgym train-verifier``), a LiteLLM model, or ``oracle:<accuracy>`` (a
    simulated verifier of checkable items, :class:`~rubricgym.judges.checkable.OracleVerifier`)."""
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
    rubricator_system: str = RUBRICATOR_SYSTEM
    """The rubricator's instructions (domain-neutral by default; name your domain for sharper rubrics)."""
    rubricator_user: str = RUBRICATOR_USER
    """The rubricator's request; ``{problem}`` and ``{cot}`` are filled in."""
    verifier_scoring: str = "sampled"
    """How the verifier's verdicts are read: ``sampled`` (it writes the JSON reply; any verifier)
    or ``probability`` (the in-process verifier: each "yes" / "no" from its next-token distribution
    in the reply's fixed frame, the choice greedy constrained decoding makes, at a fraction of its cost)."""
    verifier_items_per_call: int = ITEMS_PER_CALL
    """Distinct rubric items decided in one verifier call (a group's items are verified together).
    A large verifier answers a dozen at once; a small trained one is more reliable one item per call
    (train it on rows of as many items: ``rubricgym rubric-data --verifier-items-per-row``)."""
    verifier_system: str = VERIFIER_SYSTEM
    """The verifier's instructions."""
    verifier_user: str = VERIFIER_USER
    """The verifier's request; ``{problem}``, ``{cot}`` and ``{items}`` are filled in."""

    def __post_init__(self) -> None:
        check_knobs(RubricConfig, vars(self))  # a prompt given as 5, a NaN alpha: refused now, not at the first group


DIAGNOSTICS = ("valid_fraction", "informative_valid_fraction", "mean_valid_corr", "mean_cot_reward", "num_items", "items_per_rubric", "format_rate",
               "degenerate", "cot_correct_corr", "unverified_fraction")
"""The per-group statistics every training step logs as ``rubric_<name>`` (averaged over its
groups; ``rubric_degenerate`` is the share of groups all right or all wrong, ``rubric_cot_correct_corr``
the correlation of the chain-of-thought reward with correctness and ``rubric_informative_valid_fraction``
the valid fraction of the groups that are not degenerate, each over the groups where it is defined)."""


class RubricScorer:
    """RLCER as a group scorer: rubrics written (by the policy or a fixed LLM), verified on every
    member, validated against correctness, turned into rewards; holds the bank and the tracker.

    Each member's reward is its reasoner reward (env reward + CoT reward), plus the rubricator
    reward of the rubric it wrote (policy mode), split in ``role_rewards``; its components gain
    ``cot`` (and ``rubricator``); its info gains ``rubric_stats`` (the group's statistics).
    """

    relative = True
    name = "rubric"

    def __init__(self, config: RubricConfig | None = None):
        self.config = config = config or RubricConfig()
        self.verifier = (OracleVerifier.parse(config.verifier) if is_oracle(config.verifier)
                         else make_llm(config.verifier, api_base=config.api_base, knob="verifier"))
        if config.verifier_scoring not in ("sampled", "probability"):
            raise ValueError(f"verifier_scoring must be 'sampled' or 'probability', got {config.verifier_scoring!r}")
        if config.verifier_items_per_call < 1:
            raise ValueError(f"verifier_items_per_call must be at least 1, got {config.verifier_items_per_call}")
        if config.verifier_scoring == "probability" and not hasattr(getattr(self.verifier, "backend", None), "choose_sequence"):
            raise ValueError("verifier_scoring='probability' needs the in-process verifier ('local' or 'local:<checkpoint>')")
        self.policy_rubricator = isinstance(config.rubricator, str) and config.rubricator == "policy"
        self.rubricator = None if self.policy_rubricator else make_llm(config.rubricator, api_base=config.api_base, knob="rubricator")
        self.bank = RubricBank()
        self.tracker = RubricTracker()

    async def rubrics_and_rewards(self, task_id: str, members: Sequence[Member]) -> tuple[RLCERResult, list[RubricSet], int]:
        """The group's rubric sets and RLCER rewards (and the number of failed verifications)."""
        cfg = self.config
        problem = members[0].episode.task
        cots = [m.episode.answer or "" for m in members]
        if self.policy_rubricator:
            rubric_sets = []
            for index, member in enumerate(members):
                if member.rubric_text is None:
                    continue
                rubric, _ = parse_rubric(member.rubric_text)
                rubric_sets.append(RubricSet(items=rubric.items if rubric else [], format_ok=rubric is not None, author=index))
        else:
            # authors spread over the group, so rubrics see different responses
            count = min(len(members), max(1, cfg.rubrics_per_group))
            authors = sorted({int(round(x)) for x in np.linspace(0, len(members) - 1, count)})
            written = await asyncio.gather(*(write_rubric(self.rubricator, problem, cots[a], a, cfg.rubricator_max_tokens,
                                                          cfg.rubricator_system, cfg.rubricator_user) for a in authors))
            rubric_sets = [r for r, _ in written]
        failures = await fill_satisfaction(rubric_sets, problem, cots, self.verifier, cfg.max_fixes,
                                           cfg.verifier_system, cfg.verifier_user, cfg.verifier_items_per_call,
                                           scoring=cfg.verifier_scoring)
        correct = [bool(m.episode.correct) for m in members]
        result = rlcer_rewards(rubric_sets, correct, [m.env_reward for m in members], cfg.alpha, cfg.signed_validity)
        result.stats["verifier_failures"] = float(failures)
        self.tracker.record(result.stats)
        for rubric, valid, corr in zip(rubric_sets, result.valid, result.correlations):
            self.bank.add(task_id, [it for it, v in zip(rubric.items, valid) if v], [c for c, v in zip(corr, valid) if v])
        return result, rubric_sets, failures

    async def score_group(self, task_id: str, members: Sequence[Member]) -> GroupScore:
        if any(m.episode.correct is None for m in members):
            raise ValueError("RLCER needs verifiable episodes: the env reported correct=None")
        result, rubric_sets, failures = await self.rubrics_and_rewards(task_id, members)
        by_author = {r.author: reward for r, reward in zip(rubric_sets, result.rubricator_rewards)}
        scored = []
        for rank in range(len(members)):
            role_rewards = {"reasoner": float(result.reasoner_rewards[rank])}
            components = {"cot": float(result.cot_rewards[rank])}
            if self.policy_rubricator and rank in by_author:
                role_rewards["rubricator"] = components["rubricator"] = float(by_author[rank])
            scored.append(MemberScore(reward=sum(role_rewards.values()), components=components, role_rewards=role_rewards,
                                      info={"rubric_stats": dict(result.stats)}))
        rubrics = [{"author": r.author, "format_ok": r.format_ok, "items": [
            {"description": item.description, "score": item.score, "valid": bool(valid[k]),
             "corr": None if not np.isfinite(corr[k]) else float(corr[k]),
             "satisfied": [int(v) for v in r.satisfaction[k]] if r.satisfaction is not None else []}
            for k, item in enumerate(r.items)]} for r, valid, corr in zip(rubric_sets, result.valid, result.correlations)]
        return GroupScore(scored, failed=False, info={"rubric_stats": dict(result.stats), "rubrics": rubrics},
                          usage={"verifier_failures": float(failures)},
                          stats={k: float(result.stats[k]) for k in DIAGNOSTICS if k in result.stats})
