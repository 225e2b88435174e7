"""``rubricgym train-judge``: a small local judge trained for the task, by distillation (SFT of the
default model + LoRA on a teacher's judgements) and by GRPO on ``JudgeGroup-v0`` (reward: pairwise
agreement with the gold order), or one after the other. The result is a checkpoint that every
judge setting accepts as ``local:<checkpoint>``.

Teachers: ``verifier`` (the groups' gold itself: verified outcomes, or a judged file's scores),
``oracle:<a>`` (a simulated judge right on a share ``a`` of (good, bad) pairs, for experiments:
does a student of a 0.8 teacher land below, at or above 0.8?), or ``judged`` (the ruler scores
recorded in a ``rubricgym judge --output`` / ``groups.jsonl`` file, a real teacher's).

Examples:
    >>> config = JudgeTrainingConfig(method="sft", output_dir="runs/judge")     # doctest: +SKIP
    >>> result = train_judge(config)                                            # doctest: +SKIP
    >>> result["checkpoint"], result["held_out_pairwise"]                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rubricgym.agents.policy import Policy, PolicyConfig
from rubricgym.agents.sft import SFTConfig, sft
from rubricgym.envs.judge import JudgeGroupEnv, JudgeTask
from rubricgym.judges.base import mean_agreement, pair_outcomes
from rubricgym.judges.oracle import OracleJudge, is_oracle

JUDGE_ENV = "JudgeGroup-v0"


@dataclass
class JudgeTrainingConfig:
    """What ``rubricgym train-judge`` trains, from what, and where the judge goes."""

    groups: str = "math"
    """The ``JudgeGroup-v0`` groups: ``math`` (built-in), a ``groups.jsonl`` or an LLMBar ``.json``."""
    eval_groups: str = ""
    """Held-out groups (empty: the built-in set's test split, else the training file itself is
    refused: measure on groups the judge never trained on)."""
    teacher: str = "verifier"
    """Whose judgements SFT distils: ``verifier`` (the gold), ``oracle:<accuracy>`` (simulated),
    ``judged`` (the file's recorded judge scores)."""
    method: Literal["sft", "grpo", "sft+grpo"] = "sft+grpo"
    """Distillation, RL on the judge env (reward: pairwise agreement with the gold), or both in turn."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    sft_orders: tuple[str, ...] = ("recorded", "reversed")
    """Presentation orders of each group in the SFT rows (``recorded``, ``reversed``, ``shuffled``):
    more than one teaches the judge that the position of an answer says nothing of its quality."""
    grpo_steps: int = 20
    """GRPO steps on the judge env."""
    grpo_learning_rate: float = 5e-5
    """GRPO's learning rate (after SFT the adapter needs gentler steps than from scratch)."""
    group_size: int = 4
    """Replies per group in GRPO."""
    groups_per_step: int = 4
    """Judge tasks per GRPO step."""
    eval_every: int = 5
    """Held-out pairwise accuracy every k optimiser steps (the training curve)."""
    max_eval_groups: int = 0
    """Held-out groups measured during training (0: all of them)."""
    measure_start: bool = True
    """Measure the held-out accuracy before training too (off when the start was just measured:
    GRPO from the adapter an SFT run has ended and measured, or SFT continued from a checkpoint);
    off, the result's ``start_pairwise`` is None."""
    pointwise: bool = False
    """Train a pointwise judge: one answer per prompt (``JudgeGroup-v0`` with ``pointwise=True``),
    used with ``scoring="pointwise"``, which reads its score by probability; the curve is measured
    that way too. The teacher's scores are written as one decimal in [0.1, 0.9] (the digit the
    reader reads after ``0.``)."""
    reference: bool = False
    """Train a reference-guided judge (``JudgeGroup-v0`` with ``reference=True``): its prompt names
    the task's reference answer, as ``<Family>RulerRef-v0`` judges; measured and used that way."""
    counterfactual_references: bool = False
    """Reference-guided pointwise SFT (``pointwise`` and ``reference``): each answer is also shown
    under another training task's reference that flips the math verifier's verdict (a right answer
    beside a reference it does not match, a wrong one beside a reference its final answer does
    match), labelled by that verifier. The two rows differ only in the reference, so the judge
    can fit both only by comparing the answer with it, not by how the answer reads. For groups
    whose answers the math verifier checks (the built-in ``math`` set, ``judge-data`` of Math-v0)."""
    balance: bool = True
    """Pointwise SFT rows: as many good answers (teacher score above 0.5) as bad ones (the
    majority is subsampled, seeded), so the judge cannot win by always saying the common verdict."""
    env: str = ""
    """Judge groups of this family instead of ``groups`` / ``eval_groups``: the base model's groups
    on the family's training tasks and, held out, on its test tasks, each with ``scripted_members``
    of the family's scripted agents mixed in (the gold: the family's own verified outcome), written
    to ``<output_dir>/groups-train.jsonl`` and ``groups-test.jsonl`` (kept: a rerun reuses them)."""
    env_groups: int = 64
    """Groups recorded per split with ``env`` (the held-out split gets a quarter, at least 4)."""
    env_group_size: int = 4
    """The base model's episodes per recorded group with ``env``."""
    scripted_members: int = 2
    """Scripted agents' episodes added to each recorded group with ``env``."""
    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(max_new_tokens=96, temperature=1.0))
    output_dir: str = "runs/judge"
    """``sft/`` and ``grpo/`` checkpoints, ``curve.json`` and ``judge_curve.png`` go here."""
    seed: int = 0


def family_groups(config: JudgeTrainingConfig) -> JudgeTrainingConfig:
    """``config`` with its groups recorded from ``config.env`` (see :attr:`JudgeTrainingConfig.env`);
    unchanged without one."""
    if not config.env:
        return config
    from rubricgym.agents.policy import Policy
    from rubricgym.app.judge_data import record_groups
    from rubricgym.registration import held_out, training_kwargs

    out = Path(config.output_dir)
    splits = {"train": (config.env, training_kwargs(config.env, {}), config.env_groups),
              "test": (*held_out(config.env, {}), max(4, config.env_groups // 4))}
    paths = {split: out / f"groups-{split}.jsonl" for split in splits}
    if not all(path.is_file() for path in paths.values()):
        policy = Policy(replace(config.policy, lora_r=0, adapter=None))  # the base model's own answers
        for split, (env_id, kwargs, groups) in splits.items():
            paths[split].unlink(missing_ok=True)
            record_groups(env_id, kwargs, groups=groups, group_size=config.env_group_size, out=paths[split], seed=config.seed,
                          policy=policy, scripted_members=config.scripted_members)
    return replace(config, groups=str(paths["train"]), eval_groups=str(paths["test"]))


def judge_env(groups: str, split: str = "train", **kwargs: Any) -> JudgeGroupEnv:
    """``JudgeGroup-v0`` on ``groups`` (the built-in ``math`` set's ``split``, or a file)."""
    return JudgeGroupEnv(groups=groups, **({"split": split} if groups == "math" else {}), **kwargs)


def eval_env(config: JudgeTrainingConfig, **kwargs: Any) -> JudgeGroupEnv:
    kwargs.setdefault("reference", config.reference)
    if config.eval_groups:
        return judge_env(config.eval_groups, **kwargs)
    if config.groups != "math":
        raise ValueError("eval_groups is required with your own groups (held-out groups the judge never trains on)")
    return judge_env("math", "test", **kwargs)


def teacher_scores(teacher: str, gold: list[float], seed: str) -> list[float]:
    """A teacher's scores of one group, member by member."""
    if teacher in ("verifier", "judged"):
        if len(gold) == 1:  # a pointwise task's gold is already scaled within its group
            return list(gold)
        low, high = min(gold), max(gold)
        return [(g - low) / (high - low) if high > low else 0.5 for g in gold]
    if is_oracle(teacher):
        return OracleJudge.parse(teacher).scores([g == max(gold) for g in gold], seed=seed)
    raise ValueError(f"teacher must be 'verifier', 'judged' or 'oracle:<accuracy>', got {teacher!r}")


def counterfactual_tasks(tasks: list[JudgeTask], seed: int = 0) -> list[JudgeTask]:
    """For each pointwise reference-guided task, the same answer under another task's reference
    that flips the math verifier's verdict, labelled by it (tasks with no such reference are
    skipped). See ``JudgeTrainingConfig.counterfactual_references``."""
    from rubricgym.envs.math import math_correct
    from rubricgym.spaces import last_reply

    correct = math_correct("reference")  # the verifier that labelled the built-in groups
    rng = random.Random(seed)
    pool = sorted({task.reference for task in tasks if task.reference is not None})
    flipped = []
    for task in tasks:
        answer = last_reply(task.trajectories[0])
        right = task.gold[0] > 0.5
        choices = [ref for ref in pool if ref != task.reference and correct(answer, reference=ref) != right]
        if choices:
            flipped.append(replace(task, id=f"{task.id}~cf", reference=rng.choice(choices), gold=(0.0 if right else 1.0,)))
    return flipped


def teacher_rows(env: JudgeGroupEnv, teacher: str, balance: bool = False, seed: int = 0,
                 counterfactual: bool = False) -> list[dict[str, Any]]:
    """One SFT row per task: the judge's prompt and the teacher's reply, ids in presentation order.
    Pointwise tasks: the score as one decimal in [0.1, 0.9]; ``balance``: as many rows above 0.5
    as below (the majority subsampled with ``seed``); ``counterfactual``: also each answer under a
    reference that flips its verdict (:func:`counterfactual_tasks`; the verifier is the teacher)."""
    if counterfactual and not (env.config.pointwise and env.config.reference and teacher == "verifier"):
        raise ValueError("counterfactual references need a pointwise, reference-guided judge env and the verifier as teacher")
    rows, above = [], []
    tasks = env.tasks + (counterfactual_tasks(env.tasks, seed) if counterfactual else [])
    for task in tasks:
        obs = env.first_messages(task, {})
        scores = teacher_scores(teacher, list(task.gold), task.id)
        if env.config.pointwise:
            scores = [min(0.9, max(0.1, round(float(s), 1))) for s in scores]
        ids = env.ids(task)
        reply = {"scores": [{"trajectory_id": ids[i], "score": round(float(scores[i]), 2)} for i in env.presentation(task)]}
        rows.append({"prompt": obs, "completion": [{"role": "assistant", "content": json.dumps(reply)}]})
        above.append(scores[0] > 0.5)
    if not (balance and env.config.pointwise):
        return rows
    good = [row for row, up in zip(rows, above) if up]
    bad = [row for row, up in zip(rows, above) if not up]
    n = min(len(good), len(bad))
    rng = random.Random(seed)
    return rng.sample(good, n) + rng.sample(bad, n)


def policy_pairwise(policy: Policy, env: JudgeGroupEnv, max_groups: int = 0, batch: int = 8) -> dict[str, float]:
    """Held-out pairwise accuracy of the policy's greedy replies on ``env``'s groups (a format
    failure counts 0.5, a judge that said nothing), and the share of valid replies."""
    tasks = env.tasks[: max_groups or None]
    agreements, valid = [], []
    for start in range(0, len(tasks), batch):
        part = tasks[start:start + batch]
        prompts = [env.reset(options={"task_id": t.id})[0] for t in part]
        samples = policy.sample(prompts, greedy=True)
        for task, sample in zip(part, samples):
            env.reset(options={"task_id": task.id})
            info = env.step(sample.text)[4]
            ok = info["reward_components"].get("format", 0.0) == 1.0
            valid.append(ok)
            agreements.append(info["reward_components"]["pairwise"] if ok else 0.5)
    return {"pairwise": float(np.mean(agreements)), "valid": float(np.mean(valid))}


def ruler_pairwise(judge: Any, env: JudgeGroupEnv, max_groups: int = 0, progress: bool = True, max_tokens: int = 128,
                   max_fixes: int = 0, scoring: str = "sampled") -> dict[str, Any]:
    """Pairwise accuracy of a judge as RULER uses it (``local:<checkpoint>``, an API model,
    ``oracle:<a>``) on ``env``'s groups in ``env``'s presentation order: a failed group counts 0.5
    (a judge that has not finished its score list in ``max_tokens`` has failed: four scores take
    about 70). Also the judge's cost: prompt and completion tokens, seconds per group.
    ``scoring``: RULER's (``sampled``, ``probability``, ``pointwise``)."""
    from tqdm import tqdm

    from rubricgym.judges.ruler import oracle_ruler_result, ruler_score_sync
    from rubricgym.llm import make_llm

    tasks = env.tasks[: max_groups or None]
    oracle = OracleJudge.parse(judge) if is_oracle(judge) else None
    llm = None if oracle else make_llm(judge)
    settings = {"dedup": False, "max_tokens": max_tokens, "max_fixes": max_fixes, "scoring": scoring}
    agreements, failed, tokens, start = [], 0, [0, 0], time.perf_counter()
    members: list[tuple[float, bool]] = []  # (score, whether the member is among the group's best)
    pairs: list[tuple[bool, float]] = []  # (the better one shown first, agreement) of every pair read
    ties = 0
    for task in tqdm(tasks, desc=f"judging held-out groups ({judge})", unit="group", disable=not progress):
        order = env.presentation(task)
        shown = [list(task.trajectories[i]) for i in order]
        if oracle is not None:
            result = oracle_ruler_result(oracle, task.id, [task.gold[i] == max(task.gold) for i in order])
        else:
            config = replace(env.ruler_config(task), **settings)  # the env's prompt: its rubric, its reference
            result = ruler_score_sync(shown, llm, config, list(task.tools) if task.tools else None)
        tokens[0] += result.prompt_tokens
        tokens[1] += result.completion_tokens
        if result.failed:
            failed += 1
            agreements.append(0.5)
            continue
        gold = [task.gold[i] for i in order]
        outcomes = pair_outcomes(list(result.scores), gold)
        agreements.append(mean_agreement(outcomes))
        pairs += outcomes
        members += [(float(score), g == max(gold)) for score, g in zip(result.scores, gold)]
        ties += sum(agreement == 0.5 for _, agreement in outcomes)
    seconds = time.perf_counter() - start
    return {"pairwise": float(np.mean(agreements)), "groups": len(tasks), "failed": failed,
            "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "seconds_per_group": seconds / max(1, len(tasks)),
            "per_group": agreements, "member_scores": members, "pairs": pairs, "tied_pairs": ties}


def in_memory_judge(policy: Policy) -> Any:
    """The policy being trained as an in-process judge (its weights as they are now, no cache)."""
    from rubricgym.llm import LLM, LLMConfig
    from rubricgym.llm.backends import TransformersBackend

    return LLM(TransformersBackend(model_and_tokenizer=(policy.model, policy.tokenizer), schema_hint=False),
               LLMConfig(cache_dir=None))


def train_judge(config: JudgeTrainingConfig, progress: bool = True) -> dict[str, Any]:
    """Train a judge as ``config`` says; returns the checkpoint, the training curve and the
    held-out pairwise accuracy of the policy's greedy replies before and after."""
    from rubricgym.agents.checkpoints import set_seed
    from rubricgym.agents.train import TrainConfig, Trainer

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = family_groups(config)
    held_out = eval_env(config)
    set_seed(config.seed)
    curve: list[dict[str, Any]] = []
    checkpoint: Path | None = None
    rows: list[dict[str, Any]] = []
    if "sft" in config.method:  # before the model loads: a bad teacher or option fails at once
        orders = ("recorded",) if config.pointwise else config.sft_orders  # one answer per prompt: no order to vary
        rows = [row for order in orders for row in teacher_rows(
            judge_env(config.groups, order=order, pointwise=config.pointwise, reference=config.reference), config.teacher,
            config.balance, config.seed, config.counterfactual_references)]
    policy = Policy(config.policy)

    measuring = [0.0]  # seconds spent on held-out readings (training time is the rest)

    def measure(stage: str, step: int) -> dict[str, float]:
        began = time.perf_counter()
        if config.pointwise:  # as the judge will be used: each answer alone, its score read by probability
            read = ruler_pairwise(in_memory_judge(policy), held_out, config.max_eval_groups, progress=False, scoring="pointwise")
            measured = {"pairwise": read["pairwise"], "valid": 1.0 - read["failed"] / max(1, read["groups"])}
        else:
            measured = policy_pairwise(policy, held_out, config.max_eval_groups)
        curve.append({"stage": stage, "step": step, **measured})
        measuring[0] += time.perf_counter() - began
        return measured

    start = time.perf_counter()
    if "sft" in config.method:
        sft_config = replace(config.sft, eval_every=config.sft.eval_every or config.eval_every)
        sft(policy, rows, sft_config, out / "sft", progress=progress,
            on_eval=lambda step: measure("sft", step) if step or config.measure_start else {})
        checkpoint = max((out / "sft").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    if "grpo" in config.method:
        if not curve and config.measure_start:
            measure("grpo", 0)
        base_steps = curve[-1]["step"] if curve else 0
        env_kwargs = {"groups": config.groups} if config.groups != "math" else {}
        env_kwargs.update({k: True for k in ("pointwise", "reference") if getattr(config, k)})
        train_config = TrainConfig(env=JUDGE_ENV, env_kwargs=env_kwargs,
                                   steps=config.grpo_steps, group_size=config.group_size,
                                   groups_per_step=config.groups_per_step, seed=config.seed, output_dir=str(out / "grpo"),
                                   report_to=("none",), record_groups=0, eval_tasks=1, policy=config.policy)
        train_config.grpo.learning_rate = config.grpo_learning_rate
        trainer = Trainer(train_config, policy=policy)  # GRPO goes on from the SFT weights in memory
        for step in range(1, config.grpo_steps + 1):
            stats = trainer.train_step()
            trainer.log(stats)
            if step == config.grpo_steps or step % config.eval_every == 0:
                measure("grpo", base_steps + step)
        checkpoint = trainer.save_checkpoint()
        trainer.envs.close()
    minutes = (time.perf_counter() - start) / 60
    (out / "curve.json").write_text(json.dumps(curve, indent=1))
    plot = plot_curve(curve, out / "judge_curve.png", f"{config.method} judge, teacher {config.teacher}")
    return {"checkpoint": str(checkpoint), "curve": curve, "held_out_pairwise": curve[-1]["pairwise"],
            "start_pairwise": next((r["pairwise"] for r in curve if r["step"] == 0), None), "minutes": minutes,
            "training_minutes": minutes - measuring[0] / 60,
            "plot": str(plot)}


def plot_curve(curve: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Held-out pairwise accuracy (and valid-reply share) over judge-training steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for stage, marker in (("sft", "o"), ("grpo", "s")):
        points = [r for r in curve if r["stage"] == stage]
        if points:
            ax.plot([r["step"] for r in points], [r["pairwise"] for r in points], marker=marker, label=f"{stage}: pairwise")
            ax.plot([r["step"] for r in points], [r["valid"] for r in points], marker=marker, linestyle=":",
                    alpha=0.6, label=f"{stage}: valid replies")
    ax.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("held-out share")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
