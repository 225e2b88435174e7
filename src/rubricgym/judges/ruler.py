"""RULER group judging: an LLM judge ranks N trajectories of one scenario against each other,
reading the agent's system prompt as the specification, and scores each in [0, 1].

Beyond ART's ``ruler_score_group``: scores are matched by trajectory id (never by position),
validated and clamped to [0, 1]; a wrong number of scores or broken JSON is sent back to the
judge for a fix; the messages shared by all trajectories are sent once; identical trajectories
are judged once; the presentation order can be shuffled over several permutations and the
scores averaged (against position bias); the tool schemas are shown to the judge; every call
goes through :class:`rubricgym.llm.LLM` (disk cache, retries, timeout, concurrency limit,
accounting). When the judge still fails, the documented fallback keeps every trajectory: its
``ruler`` score is ``None``, the group is flagged ``failed``, and wrappers keep the env reward.

This module needs no gym: the wrappers in :mod:`rubricgym.wrappers.ruler` and other trainers'
reward functions call :func:`ruler_score` or a :class:`RulerScorer`.

Examples:
    >>> from rubricgym.judges.ruler import ruler_score_sync
    >>> result = ruler_score_sync([msgs_a, msgs_b, msgs_c], judge="openai/gpt-4o-mini")  # doctest: +SKIP
    >>> result.scores, result.explanations                                                # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import random
import warnings
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np
from pydantic import BaseModel

from rubricgym.knobs import check_knobs, knob_range
from rubricgym.judges.correction import JudgeCorrection, combine_reads, corrected
from rubricgym.judges.oracle import OracleJudge, is_oracle
from rubricgym.llm import LLM, LLMCallError, make_llm

from .base import Combine, GroupScore, Member, MemberScore, combine_reward, run_sync

Message = dict[str, Any]

DEFAULT_RUBRIC = """\
- A trajectory that does what the system prompt and the user asked scores well above one that does not.
- Among those that succeed, the more accurate, faithful (nothing invented beyond the given context) and efficient ones score higher.
- Make score gaps track quality gaps: near-equal trajectories get near-equal scores, a far worse one a far lower score.
- Partial progress toward the goal earns partial credit; an empty, off-topic or broken reply earns close to 0."""

JUDGE_INSTRUCTIONS = """\
You judge AI agent trajectories. All trajectories below are attempts at the same task; the \
agent's system prompt in the shared context is the specification the agent had to follow. \
Compare the trajectories with each other and give each a score from 0 to 1, following this rubric:
{rubric}

Reply with only a JSON object: {{"scores": [{{"trajectory_id": "<id>", {explanation}\
"score": <number from 0 to 1>}}]}} with exactly one entry for each trajectory id: {ids}."""


class RulerScore(BaseModel):
    trajectory_id: str
    explanation: str = ""
    score: float


class RulerResponse(BaseModel):
    scores: list[RulerScore]


#: how a judge's scores are obtained (see RulerConfig.scoring)
SCORINGS = ("sampled", "probability", "pointwise")
#: the reply a probability reader forces up to a score's first decimal
SCORE_PREFIX = '{"scores": [{"trajectory_id": "%s", "score": 0.'


@dataclass
class RulerConfig:
    """Every RULER knob, named, typed and defaulted."""

    rubric: str = DEFAULT_RUBRIC
    """What the judge scores against (the system prompt stays the specification)."""
    share_prefix: bool = True
    """Send the messages common to every trajectory once, as a context block."""
    dedup: bool = True
    """Judge identical trajectories once and copy the score."""
    permutations: int = field(default=1, metadata=knob_range(1, 64))
    """Judge the group in this many presentation orders and average (against position bias)."""
    shuffle: bool = False
    """Shuffle the order even with one permutation."""
    seed: int = 0
    """Seed of the shuffles (orders are reproducible, so cached calls stay cached)."""
    show_tools: bool = True
    """Show the agent's tool schemas to the judge."""
    max_fixes: int = 2
    """Times an invalid reply (bad JSON, wrong ids or count) is sent back for a fix."""
    max_tokens: int = 1024
    """Completion budget of one judge call."""
    explanation_max_chars: int = 160
    """Longest explanation the reply schema allows: constrained decoders (llama.cpp, the
    in-process judge) close the string there, so a rambling judge still finishes its reply.
    0 asks for scores only (a tiny judge's explanations cost most of its tokens)."""
    scoring: str = "sampled"
    """``"sampled"``: the judge writes its scores (any judge). ``"probability"`` (G-Eval; the
    in-process judge only): each trajectory's score is the expected value of its first decimal
    under the judge's next-token distribution, read in one forward pass, without explanations.
    ``"pointwise"`` (the in-process judge only): each unique trajectory alone in its own prompt
    (RULER's prompt for a group of one: the same specification and rubric), its score read by
    probability as above. No position bias and no cross-talk between trajectories: the mode of a
    small judge trained for the task (``rubricgym train-judge --pointwise``); one call per
    trajectory, each repeating the instructions (a group of four reads about 1,500 prompt tokens)."""
    correction: str = ""
    """A judge's calibrated error profile (``rubricgym judge-eval --calibrate --output <file>``):
    the group is read as often as the profile says (each read in its own order) and each score
    corrected by its error rates (:mod:`rubricgym.judges.correction`). Empty: scores as read."""
    correction_method: str = "posterior"
    """How a profile corrects scores: ``posterior`` (P(good | reads)), ``backward`` or ``forward``
    (Cai et al.; on one read both are affine, which GRPO's group standardisation undoes)."""
    debug: bool = False
    """Print each group's scores and the judge's reasoning (rich)."""

    def __post_init__(self):
        check_knobs(RulerConfig, vars(self))  # types, finiteness and ranges, now
        if self.scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))}, got {self.scoring!r}")
        self.judge_correction()  # a missing or unusable profile fails here, not at the first group

    def judge_correction(self) -> JudgeCorrection | None:
        """The correction ``correction`` names (None without one)."""
        return JudgeCorrection.load(self.correction, self.correction_method) if self.correction else None

    def reading(self) -> "RulerConfig":
        """The settings a group is read with: at least the correction's reads, as permutations."""
        correction = self.judge_correction()
        if correction is None or correction.reads <= self.permutations:
            return self
        return replace(self, permutations=correction.reads)


@dataclass
class RulerResult:
    """Scores in input order (``None`` for every trajectory when the judge failed)."""

    scores: list[float | None]
    explanations: list[str]
    failed: bool = False
    error: str | None = None
    judge_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    clamped: int = 0
    unique: int = 0
    raw_scores: list[list[float]] = field(default_factory=list)
    reads_kept: int | None = None
    """Reads combined into the scores where a correction dropped order-following ones (None: all)."""


def render_message(message: Message) -> str:
    """A compact, readable rendering of one chat message for the judge."""
    role = message.get("role", "?")
    parts = []
    if message.get("content"):
        parts.append(str(message["content"]))
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        parts.append(f"[tool call] {function.get('name')}({function.get('arguments')})")
    name = f" {message['name']}" if role == "tool" and message.get("name") else ""
    return f"<{role}{name}>\n" + "\n".join(parts) + f"\n</{role}>"


def common_prefix_length(trajectories: Sequence[Sequence[Message]]) -> int:
    """Number of leading messages that every trajectory shares (at least one is kept per trajectory)."""
    if not trajectories:
        return 0
    shortest = min(len(t) for t in trajectories)
    n = 0
    while n < shortest - 1 and all(t[n] == trajectories[0][n] for t in trajectories):
        n += 1
    return n


REFERENCE_BLOCK = ("\n\nA reference answer for this task is given below. Judge correctness by agreement with it "
                   "(equivalent forms count as agreeing); do not solve the task again yourself.\n"
                   "<reference_answer>\n{reference}\n</reference_answer>")
"""Appended to the rubric (the judge's instructions) by reference-guided judging."""


def with_reference(config: RulerConfig, reference: str | None) -> RulerConfig:
    """``config`` for reference-guided judging (MT-Bench's reference-guided grading): the rubric
    names the task's reference answer as the standard; unchanged when there is none.

    Examples:
        >>> with_reference(RulerConfig(rubric="Be right."), "6").rubric.endswith("<reference_answer>\\n6\\n</reference_answer>")
        True
    """
    if reference is None:
        return config
    return replace(config, rubric=config.rubric + REFERENCE_BLOCK.format(reference=reference))


def build_judge_messages(trajectories: Sequence[Sequence[Message]], ids: Sequence[str], order: Sequence[int],
                         config: RulerConfig, tools: list[dict[str, Any]] | None) -> list[Message]:
    """The judge's prompt for the unique ``trajectories`` presented in ``order``."""
    prefix = common_prefix_length(trajectories) if config.share_prefix else 0
    blocks = []
    if prefix:
        blocks.append("<shared_context>\n" + "\n".join(render_message(m) for m in trajectories[0][:prefix]) + "\n</shared_context>")
    if tools and config.show_tools:
        blocks.append("<agent_tools>\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools) + "\n</agent_tools>")
    for index in order:
        body = "\n".join(render_message(m) for m in trajectories[index][prefix:])
        blocks.append(f'<trajectory id="{ids[index]}">\n{body}\n</trajectory>')
    explanation = '"explanation": "<one or two sentences>", ' if config.explanation_max_chars > 0 else ""
    system = JUDGE_INSTRUCTIONS.format(rubric=config.rubric, ids=", ".join(ids[i] for i in order), explanation=explanation)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(blocks)}]


def response_schema(ids: Sequence[str], explanation_max_chars: int = 160) -> dict[str, Any]:
    """JSON schema of the reply; servers with constrained decoding can only emit valid ids and counts.

    Examples:
        >>> response_schema(["t1", "t2"], 0)["properties"]["scores"]["items"]["required"]
        ['trajectory_id', 'score']
    """
    item: dict[str, Any] = {"trajectory_id": {"type": "string", "enum": list(ids)}}
    if explanation_max_chars > 0:
        item["explanation"] = {"type": "string", "maxLength": explanation_max_chars}
    item["score"] = {"type": "number"}
    return {
        "type": "object",
        "properties": {"scores": {
            "type": "array", "minItems": len(ids), "maxItems": len(ids),
            "items": {"type": "object", "properties": item, "required": list(item)},
        }},
        "required": ["scores"],
    }


def check_response_ids(expected: Sequence[str]):
    """A check of a parsed reply: exactly one finite score for each id (the problem, or None)."""

    def check(response: RulerResponse) -> str | None:
        got = [s.trajectory_id for s in response.scores]
        if sorted(got) != sorted(expected):
            missing = sorted(set(expected) - set(got))
            extra = sorted(set(got) - set(expected))
            duplicated = sorted({i for i in got if got.count(i) > 1})
            return (f"expected exactly one score for each of {list(expected)}; got {len(got)} scores"
                    f" (missing {missing}, unknown {extra}, repeated {duplicated})")
        if any(not np.isfinite(s.score) for s in response.scores):
            return "every score must be a finite number between 0 and 1"
        return None
    return check


async def ruler_score(trajectories: Sequence[Sequence[Message]], judge: LLM | str, config: RulerConfig | None = None,
                      tools: list[dict[str, Any]] | None = None) -> RulerResult:
    """Score message lists of one scenario relative to each other; one judge call per permutation
    (and as many reads as ``config.correction`` asks, its correction applied to the scores)."""
    config = config or RulerConfig()
    result = await _read_scores(trajectories, judge, config.reading(), tools)
    return corrected(result, config.judge_correction())


async def _read_scores(trajectories: Sequence[Sequence[Message]], judge: LLM | str, config: RulerConfig,
                       tools: list[dict[str, Any]] | None) -> RulerResult:
    """RULER's reads of one group as ``config`` says, the scores of every read averaged."""
    judge = make_llm(judge)
    n = len(trajectories)
    if n == 0:
        return RulerResult([], [])
    # identical trajectories are judged once
    keys = [json.dumps(t, sort_keys=True, ensure_ascii=False, default=str) for t in trajectories]
    if config.dedup:
        first_seen: dict[str, int] = {}
        member_to_unique = [first_seen.setdefault(key, len(first_seen)) for key in keys]
    else:
        member_to_unique = list(range(n))
    unique_trajectories: list[Sequence[Message]] = []
    for member, u in enumerate(member_to_unique):
        if u == len(unique_trajectories):
            unique_trajectories.append(trajectories[member])
    k = len(unique_trajectories)
    ids = [f"t{i + 1}" for i in range(k)]
    orders = presentation_orders(k, config)

    result = RulerResult([None] * n, [""] * n, unique=k)
    calls_before, hits_before = judge.usage.calls, judge.usage.cache_hits

    async def one(order: list[int]):
        messages = build_judge_messages(unique_trajectories, ids, order, config, tools)
        response, completion = await judge.complete_json(
            messages, RulerResponse, check=check_response_ids(ids),
            schema=response_schema([ids[i] for i in order], config.explanation_max_chars),
            max_fixes=config.max_fixes, max_tokens=config.max_tokens)
        return response, completion

    if config.scoring == "probability":  # one read per permutation, every id's score in it
        scores_only = replace(config, explanation_max_chars=0)
        reads = [(build_judge_messages(unique_trajectories, ids, order, scores_only, tools), [(ids[i], ids[i]) for i in order])
                 for order in orders]
        return await _probability_scores(judge, reads, ids, config, member_to_unique, result, orders=orders)
    if config.scoring == "pointwise":  # one read per trajectory, alone in its prompt (its id there is t1)
        reads = [(pointwise_messages(t, config, tools), [(ids[i], "t1")]) for i, t in enumerate(unique_trajectories)]
        return await _probability_scores(judge, reads, ids, config, member_to_unique, result,
                                         how="alone in its prompt, ")
    try:
        outcomes = await asyncio.gather(*(one(order) for order in orders))
    except LLMCallError as err:
        result.failed, result.error = True, str(err)
        result.judge_calls = judge.usage.calls - calls_before
        return result
    per_id: dict[str, list[float]] = defaultdict(list)
    explanation: dict[str, str] = {}
    for response, completion in outcomes:  # in the order of ``orders``
        result.prompt_tokens += completion.prompt_tokens
        result.completion_tokens += completion.completion_tokens
        for item in response.scores:
            clamped = min(1.0, max(0.0, float(item.score)))
            result.clamped += clamped != item.score
            per_id[item.trajectory_id].append(clamped)
            explanation.setdefault(item.trajectory_id, item.explanation)
    result.raw_scores = [per_id[i] for i in ids]
    complete = all(len(per_id[i]) == len(orders) for i in ids)  # each read scored every id once
    unique_scores, result.reads_kept = (
        combine_reads([[per_id[i][r] for i in ids] for r in range(len(orders))], orders, config.judge_correction())
        if complete else ([float(np.mean(per_id[i])) for i in ids], None))
    result.scores = [unique_scores[u] for u in member_to_unique]
    result.explanations = [explanation.get(ids[u], "") for u in member_to_unique]
    result.judge_calls = judge.usage.calls - calls_before
    result.cache_hits = judge.usage.cache_hits - hits_before
    if config.debug:
        print_ruler_result(result, title=f"RULER ({judge.name})")
    return result


def pointwise_messages(trajectory: Sequence[Message], config: RulerConfig,
                       tools: list[dict[str, Any]] | None = None) -> list[Message]:
    """The pointwise judge's prompt: RULER's prompt for a group of one (its id is ``t1``)."""
    return build_judge_messages([trajectory], ["t1"], [0], replace(config, explanation_max_chars=0), tools)


async def _probability_scores(judge: LLM, reads: list[tuple[list[Message], list[tuple[str, str]]]], ids: list[str],
                              config: RulerConfig, member_to_unique, result: RulerResult, how: str = "",
                              orders: list[list[int]] | None = None) -> RulerResult:
    """RULER by G-Eval: each read is a prompt and the (trajectory id, id in that prompt) pairs it
    scores; the reply is forced to ``{"scores": [{"trajectory_id": <id>, "score": 0.`` for each and
    the next digit's distribution gives the expected score (averaged over a trajectory's reads;
    ``orders``: each read shows the whole group in that order, so order-following reads can be dropped)."""
    per_id: dict[str, list[float]] = defaultdict(list)
    for messages, scored in reads:
        prefixes = [SCORE_PREFIX % shown for _, shown in scored]
        try:
            scores, prompt_tokens = await judge.expected_scores(messages, prefixes)  # counted in judge.usage
        except NotImplementedError:
            result.failed, result.error = True, (f"{judge.name}: {config.scoring} scoring needs next-token probabilities "
                                                 "(the in-process judge, judge='local'); use scoring='sampled'")
            return result
        result.prompt_tokens += prompt_tokens
        result.judge_calls += 1
        for (trajectory_id, _), score in zip(scored, scores):
            per_id[trajectory_id].append(float(score))
    result.raw_scores = [per_id[i] for i in ids]
    if orders is None:  # reads that each show part of the group (pointwise): nothing follows an order
        unique_scores = [float(np.mean(per_id[i])) for i in ids]
    else:
        unique_scores, result.reads_kept = combine_reads([[per_id[i][r] for i in ids] for r in range(len(reads))],
                                                         orders, config.judge_correction())
    result.scores = [unique_scores[u] for u in member_to_unique]
    result.explanations = [f"expected score {how}under the judge's next-token distribution (G-Eval)"] * len(member_to_unique)
    return result


def ruler_score_sync(trajectories, judge, config: RulerConfig | None = None, tools=None) -> RulerResult:
    return run_sync(ruler_score(trajectories, judge, config, tools))


def print_ruler_result(result: RulerResult, title: str = "RULER", labels: Sequence[str] | None = None) -> None:
    """Rich table of scores and the judge's reasoning."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title + (" (FAILED: " + (result.error or "") + ")" if result.failed else ""))
    table.add_column("#")
    table.add_column("score", justify="right")
    table.add_column("explanation")
    for i, (score, why) in enumerate(zip(result.scores, result.explanations)):
        label = labels[i] if labels else str(i)
        table.add_row(label, "-" if score is None else f"{score:.3f}", why)
    Console(stderr=True).print(table)


def presentation_orders(k: int, config: RulerConfig) -> list[list[int]]:
    """The orders in which a group of ``k`` is shown: ``config.permutations`` of them, the first
    as recorded unless ``config.shuffle`` (seeded by ``config.seed``, so cached calls stay cached).

    Examples:
        >>> presentation_orders(3, RulerConfig())
        [[0, 1, 2]]
        >>> len(presentation_orders(3, RulerConfig(permutations=2)))
        2
    """
    rng = random.Random(config.seed)
    orders = []
    for p in range(max(1, config.permutations)):
        order = list(range(k))
        if p > 0 or config.shuffle:
            rng.shuffle(order)
        orders.append(order)
    return orders


def oracle_ruler_result(oracle: OracleJudge, seed: str, good: Sequence[bool | None],
                        config: RulerConfig | None = None) -> RulerResult:
    """What a simulated judge says about a group (labelled simulated in every explanation), in
    RULER's presentation orders of ``config`` (each order's scores mapped back and averaged, as
    for a real judge: what corrects an order-following one)."""
    if any(g is None for g in good):
        return RulerResult([None] * len(good), [""] * len(good), failed=True,
                           error=f"{oracle.name} needs each member's verified outcome (episode.correct); one has none")
    orders = presentation_orders(len(good), config.reading()) if config is not None else [list(range(len(good)))]
    read_scores = []
    for p, order in enumerate(orders):
        shown = oracle.scores([bool(good[i]) for i in order], seed=seed if p == 0 else f"{seed}|order{p}")
        read = [0.0] * len(good)
        for position, member in enumerate(order):
            read[member] = shown[position]
        read_scores.append(read)
    correction = config.judge_correction() if config is not None else None
    scores, kept = combine_reads(read_scores, orders, correction)
    result = RulerResult(scores, [f"{oracle.name}: scored from the verified outcome"] * len(good), unique=len(good),
                         raw_scores=[[read[m] for read in read_scores] for m in range(len(good))], reads_kept=kept)
    return corrected(result, correction)


class RulerScorer:
    """RULER as a group scorer: one judge call per group (per permutation), scores in [0, 1].

    Each member's reward is ``combine_reward(env_reward, {"ruler": score}, combine)``; its
    components gain ``env`` and ``ruler`` (absent when the judge failed, and the env reward is
    kept); its info gains ``ruler_score`` (NaN on failure), ``ruler_explanation`` and
    ``ruler_failed``.

    Examples:
        >>> scorer = RulerScorer("openai/gpt-4o-mini", combine="sum")           # doctest: +SKIP
        >>> run_sync(scorer.score_group("t1", members)).members[0].components   # doctest: +SKIP
    """

    relative = True
    name = "ruler"

    def __init__(self, judge: Any = "local", config: RulerConfig | None = None, combine: Combine = "sum",
                 api_base: str | None = None):
        combine_reward(0.0, {"ruler": 0.0}, combine)  # a bad combine fails here, not after the first judge call
        # "oracle:<accuracy>": a simulated judge of known accuracy that reads the verified outcomes
        self.oracle = OracleJudge.parse(judge) if is_oracle(judge) else None
        self.judge = None if self.oracle else make_llm(judge, api_base=api_base)
        self.config = config or RulerConfig()
        self.combine = combine
        self.failure_causes: set[str] = set()

    def oracle_result(self, task_id: str, members: Sequence[Member]) -> RulerResult:
        seed = task_id + "|" + "|".join(m.episode.answer or "" for m in members)
        return oracle_ruler_result(self.oracle, seed, [m.episode.correct for m in members], self.config)

    def group_config(self, members: Sequence[Member]) -> RulerConfig:
        """The RULER settings for one group (subclasses adapt them to the group, e.g. its reference)."""
        return self.config

    async def score_group(self, task_id: str, members: Sequence[Member]) -> GroupScore:
        tools = next((m.episode.tools for m in members if m.episode.tools), None)
        if self.oracle is not None:
            result = self.oracle_result(task_id, members)
        else:
            result = await ruler_score([m.messages for m in members], self.judge, self.group_config(members), tools)
        if result.failed:
            cause = (result.error or "").split("(")[-1][:80]
            if cause not in self.failure_causes:  # once per cause: a dead judge must not be silent, nor flood
                self.failure_causes.add(cause)
                warnings.warn(f"RULER judge failed, the env reward is kept: {result.error}", stacklevel=2)
        scored = []
        for member, score, why in zip(members, result.scores, result.explanations):
            env_reward = member.env_reward
            components = {"env": env_reward, **({"ruler": score} if score is not None else {})}
            scored.append(MemberScore(
                reward=combine_reward(env_reward, {"ruler": score}, self.combine), components=components,
                info={"ruler_score": float("nan") if score is None else float(score), "ruler_explanation": why,
                      "ruler_failed": bool(result.failed), **({"ruler_error": result.error} if result.failed else {})}))
        info = {"ruler_error": result.error} if result.error else {}
        return GroupScore(scored, failed=result.failed, info=info, usage={
            "judge_calls": result.judge_calls, "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens})
