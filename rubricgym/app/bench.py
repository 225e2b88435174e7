"""Reward schemes side by side: the same env family, agent, seeds and budget under each scheme.

Math (held-out accuracy on the generator's test split, greedy): ``rlvr`` (verified outcome),
``function`` (outcome + a hand-written format/length reward), ``ruler`` (the judge alone),
``ruler+rlvr`` (outcome + judge), ``rubrics`` (self-evolving rubrics, the policy writing them).
RAG support (held-out success on every fifth built-in question): ``components`` (the
independent components), ``ruler``, ``ruler+components``.

Every scheme starts from the same base weights and seed; the held-out score before training is
measured once per suite (identical by construction). Judge calls and tokens are counted from the
judge's client; policy tokens from the rollouts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rubricgym.llm import LLM, LLMConfig, make_llm
from rubricgym.registration import scheme_of

from rubricgym.agents.policy import PolicyConfig
from rubricgym.agents.evaluation import evaluate
from rubricgym.agents.train import TrainConfig, Trainer

SCHEMES: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "math": {
        "rlvr": ("Math-v0", {}),
        "function": ("MathFunction-v0", {}),
        "ruler": ("MathRuler-v0", {"combine": "replace"}),
        "ruler+rlvr": ("MathRuler-v0", {}),
        "rubrics": ("MathRubric-v0", {}),
    },
    "rag": {
        "components": ("RagSupport-v0", {}),
        "ruler": ("RagSupportRuler-v0", {"combine": "replace"}),
        "ruler+components": ("RagSupportRuler-v0", {}),
    },
}


@dataclass
class BenchConfig:
    """What to compare and with what budget."""

    suites: tuple[str, ...] = ("math", "rag")
    schemes: tuple[str, ...] = ()
    """Subset of scheme names (empty: all of each suite)."""
    steps: int = 8
    """Training steps per scheme (the default run of all eight schemes takes about 25 minutes on 2 CPU cores)."""
    group_size: int = 4
    groups_per_step: int = 2
    eval_tasks: int = 48
    max_new_tokens: int = 48
    judge: Any = "local"
    """Judge / verifier: a LiteLLM model string, ``openai/<name>`` with ``api_base``, ``local``, or an LLM / backend."""
    api_base: str | None = None
    seed: int = 0
    math_levels: tuple[int, ...] = (1,)
    judge_max_tokens: int = 1024
    """Completion budget of one RULER call (small local judges ramble: --quick uses 300)."""
    judge_max_fixes: int = 2
    """Fix requests after an invalid judge reply (constrained decoding makes them rare)."""
    judge_timeout_s: float = 120.0
    """Limit on one judge call."""
    judge_explanation_chars: int | None = None
    """Longest RULER explanation per trajectory; None: 0 (scores only) for the in-process judge,
    whose explanations echo the input and cost most of its tokens, 160 for any other judge."""
    output_dir: str = "benchmarks/results"
    command: str = ""


def _env_kwargs(suite: str, env_id: str, extra: dict[str, Any], config: BenchConfig, judge: LLM) -> dict[str, Any]:
    kwargs = dict(extra)
    if suite == "math":
        kwargs["levels"] = config.math_levels
    else:
        kwargs["split"] = "train"
    scheme = scheme_of(env_id)
    if scheme == "ruler":
        kwargs.update(judge=judge, max_tokens=config.judge_max_tokens, max_fixes=config.judge_max_fixes,
                      explanation_max_chars=config.judge_explanation_chars)
    if scheme == "rubric":
        kwargs.update(verifier=judge, max_fixes=config.judge_max_fixes)
    return kwargs


CURVE_KEYS = ("reward", "train_accuracy", "trained_completions", "judge_failed_groups", "step_seconds")
"""Per-step training stats kept in the results JSON (``accuracy`` is the verified success)."""


def _explanation_chars(config: BenchConfig, backend) -> int:
    if config.judge_explanation_chars is not None:
        return config.judge_explanation_chars
    return 0 if backend.name.startswith("local:") else 160  # the in-process backend, however it was given


def _scheme_judge(backend, config: BenchConfig) -> LLM:
    # one client per scheme over one backend (the in-process model loads once): its usage counts
    # only that scheme's calls, and no disk cache, so a rerun pays for (and times) every call
    return LLM(backend, LLMConfig(cache_dir=None, timeout_s=config.judge_timeout_s, max_tokens=config.judge_max_tokens))


def _held_out(policy, suite: str, config: BenchConfig) -> float:
    if suite == "math":
        return evaluate(policy, {"levels": config.math_levels, "split": "test"}, tasks=config.eval_tasks)["accuracy"]
    return evaluate(policy, {"split": "test"}, tasks=config.eval_tasks, env_id="RagSupport-v0")["accuracy"]


def _judge_usage(judge: LLM | None) -> dict[str, float]:
    if judge is None:
        return {"judge_calls": 0, "judge_prompt_tokens": 0, "judge_completion_tokens": 0, "judge_failures": 0}
    return {"judge_calls": judge.usage.calls, "judge_prompt_tokens": judge.usage.prompt_tokens,
            "judge_completion_tokens": judge.usage.completion_tokens, "judge_failures": judge.usage.failures}


def run_bench(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    curves: dict[str, dict[str, list[float]]] = {}
    backend = make_llm(config.judge, api_base=config.api_base).backend
    config = replace(config, judge_explanation_chars=_explanation_chars(config, backend))
    for suite in config.suites:
        before = None
        for name, (env_id, extra) in SCHEMES[suite].items():
            if config.schemes and name not in config.schemes and f"{suite}:{name}" not in config.schemes:
                continue
            judged = scheme_of(env_id) in ("ruler", "rubric")
            judge = _scheme_judge(backend, config)
            train_config = TrainConfig(env=env_id, env_kwargs=_env_kwargs(suite, env_id, extra, config, judge), algo="grpo",
                                       steps=config.steps, group_size=config.group_size,
                                       groups_per_step=config.groups_per_step, seed=config.seed, eval_tasks=0,
                                       checkpoint_every=0, output_dir=f"/tmp/rubricgym-bench/{suite}-{name}",
                                       policy=PolicyConfig(max_new_tokens=config.max_new_tokens, cpu_threads="fixed"))
            trainer = Trainer(train_config)
            if before is None:  # same base weights for every scheme: measured once per suite, untimed
                before = _held_out(trainer.policy, suite, config)
            started = time.perf_counter()
            history: list[dict[str, float]] = []
            for _ in tqdm(range(config.steps), desc=f"{suite}:{name}", disable=not progress, leave=False):
                history.append(trainer.train_step())
            after = _held_out(trainer.policy, suite, config)
            usage = _judge_usage(judge if judged else None)
            rubric_valid = [h["rubric_valid_fraction"] for h in history if "rubric_valid_fraction" in h]
            rows.append({"suite": suite, "scheme": name, "env": env_id, "held_out_before": before, "held_out_after": after,
                         "mean_train_reward": float(np.mean([h["reward"] for h in history])),
                         "mean_train_accuracy": float(np.mean([h["train_accuracy"] for h in history])),
                         "policy_completion_tokens": int(sum(h["completion_tokens"] for h in history)),
                         "judge_failed_groups": int(sum(h["judge_failed_groups"] for h in history)),
                         "rubric_valid_fraction": float(np.mean(rubric_valid)) if rubric_valid else None,
                         **usage, "minutes": (time.perf_counter() - started) / 60})
            curves[f"{suite}:{name}"] = {key: [h.get(key, float("nan")) for h in history] for key in CURVE_KEYS}
            curves[f"{suite}:{name}"]["accuracy"] = curves[f"{suite}:{name}"].pop("train_accuracy")
            if progress:
                print(f"{suite}:{name:<18} held-out {before:.3f} -> {after:.3f}  train reward "
                      f"{rows[-1]['mean_train_reward']:+.3f}  judge calls {usage['judge_calls']} "
                      f"(failed groups {rows[-1]['judge_failed_groups']})  {rows[-1]['minutes']:.1f} min", flush=True)
            trainer.envs.close()
    write_results(rows, curves, config)
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| suite | scheme | held-out before | held-out after | mean training reward | mean training success "
             "| judge calls (failed groups) | judge prompt / completion tokens | rubric valid fraction "
             "| policy completion tokens | minutes |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        valid = "" if r.get("rubric_valid_fraction") is None else f"{r['rubric_valid_fraction']:.2f}"
        lines.append(f"| {r['suite']} | {r['scheme']} | {r['held_out_before']:.3f} | {r['held_out_after']:.3f} | "
                     f"{r['mean_train_reward']:+.3f} | {r['mean_train_accuracy']:.3f} | {r['judge_calls']} "
                     f"({r['judge_failed_groups']}) | {r['judge_prompt_tokens']} / {r['judge_completion_tokens']} | "
                     f"{valid} | {r['policy_completion_tokens']} | {r['minutes']:.1f} |")
    return "\n".join(lines)


def write_results(rows: list[dict[str, Any]], curves: dict[str, dict[str, list[float]]], config: BenchConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tag = "quick" if config.steps <= 4 else "full"
    fig, axes = plt.subplots(2, len(config.suites), figsize=(6 * len(config.suites), 7), squeeze=False)
    for column, suite in enumerate(config.suites):
        for row, (metric, label) in enumerate([("reward", "training reward (each scheme on its own scale)"),
                                               ("accuracy", "training success (verified, same scale)")]):
            ax = axes[row][column]
            for key, values in curves.items():
                if key.startswith(suite + ":"):
                    ax.plot(range(1, len(values[metric]) + 1), values[metric], marker="o", label=key.split(":", 1)[1])
            ax.set_title(f"{suite}: {label}", fontsize=10)
            ax.set_xlabel("step")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"reward_schemes_{tag}.png", dpi=110)
    plt.close(fig)
    (out / f"reward_schemes_{tag}.md").write_text(
        f"Command: `{config.command}`\n\nJudge: `{getattr(config.judge, 'name', config.judge)}`"
        f"{' at ' + config.api_base if config.api_base else ''} (RULER explanations up to {config.judge_explanation_chars} "
        f"characters, {config.judge_max_tokens} tokens per call); "
        f"seed {config.seed}; {config.steps} steps of {config.groups_per_step} groups x {config.group_size}; "
        f"held-out tasks {config.eval_tasks}.\n\n{markdown_table(rows)}\n")
    (out / f"reward_schemes_{tag}.json").write_text(json.dumps({"config": config.__dict__, "rows": rows, "curves": curves},
                                                                indent=2, default=str))
