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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .policy import PolicyConfig
from .train import TrainConfig, Trainer, evaluate

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
    steps: int = 12
    group_size: int = 4
    groups_per_step: int = 2
    eval_tasks: int = 48
    max_new_tokens: int = 48
    judge: str = "local"
    """Judge / verifier: a LiteLLM model string, ``openai/<name>`` with ``api_base``, or ``local``."""
    api_base: str | None = None
    seed: int = 0
    math_levels: tuple[int, ...] = (1,)
    judge_max_tokens: int = 1024
    """Completion budget of one RULER call (small local judges ramble: --quick uses 300)."""
    judge_max_fixes: int = 2
    output_dir: str = "benchmarks/results"
    command: str = ""


def _env_kwargs(suite: str, env_id: str, extra: dict[str, Any], config: BenchConfig) -> dict[str, Any]:
    kwargs = dict(extra)
    if suite == "math":
        kwargs["levels"] = config.math_levels
    else:
        kwargs["split"] = "train"
    if "Ruler" in env_id:
        kwargs.update(judge=config.judge, max_tokens=config.judge_max_tokens, max_fixes=config.judge_max_fixes)
    if "Rubric" in env_id:
        kwargs.update(verifier=config.judge, max_fixes=config.judge_max_fixes)
    if config.api_base and ("Ruler" in env_id or "Rubric" in env_id):
        kwargs["api_base"] = config.api_base
    return kwargs


def _held_out(policy, suite: str, config: BenchConfig) -> float:
    if suite == "math":
        return evaluate(policy, {"levels": config.math_levels, "split": "test"}, tasks=config.eval_tasks)["accuracy"]
    return evaluate(policy, {"split": "test"}, tasks=config.eval_tasks, env_id="RagSupport-v0")["accuracy"]


def _judge_usage(envs) -> dict[str, float]:
    client = getattr(envs, "judge", None) or getattr(getattr(envs, "scorer", None), "verifier", None)
    if client is None:
        return {"judge_calls": 0, "judge_prompt_tokens": 0, "judge_completion_tokens": 0}
    return {"judge_calls": client.usage.calls, "judge_prompt_tokens": client.usage.prompt_tokens,
            "judge_completion_tokens": client.usage.completion_tokens}


def run_bench(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[float]] = {}
    for suite in config.suites:
        before = None
        for name, (env_id, extra) in SCHEMES[suite].items():
            if config.schemes and name not in config.schemes and f"{suite}:{name}" not in config.schemes:
                continue
            train_config = TrainConfig(env=env_id, env_kwargs=_env_kwargs(suite, env_id, extra, config), algo="grpo",
                                       steps=config.steps, group_size=config.group_size,
                                       groups_per_step=config.groups_per_step, seed=config.seed, eval_tasks=0,
                                       checkpoint_every=0, output_dir=f"/tmp/rubricgym-bench/{suite}-{name}",
                                       policy=PolicyConfig(max_new_tokens=config.max_new_tokens))
            started = time.perf_counter()
            trainer = Trainer(train_config)
            if before is None:
                before = _held_out(trainer.policy, suite, config)
            rewards, completion_tokens, prompt_tokens = [], 0, 0
            for _ in range(config.steps):
                stats = trainer.train_step()
                rewards.append(stats["reward"])
                completion_tokens += int(stats["completion_tokens"])
            after = _held_out(trainer.policy, suite, config)
            usage = _judge_usage(trainer.envs)
            rows.append({"suite": suite, "scheme": name, "env": env_id, "held_out_before": before, "held_out_after": after,
                         "mean_train_reward": float(np.mean(rewards)), "policy_completion_tokens": completion_tokens,
                         **usage, "minutes": (time.perf_counter() - started) / 60})
            curves[f"{suite}:{name}"] = rewards
            if progress:
                print(f"{suite}:{name:<18} held-out {before:.3f} -> {after:.3f}  train reward {np.mean(rewards):+.3f}  "
                      f"judge calls {usage['judge_calls']}  {rows[-1]['minutes']:.1f} min", flush=True)
            trainer.envs.close()
    write_results(rows, curves, config)
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| suite | scheme | held-out before | held-out after | mean training reward | judge calls | judge prompt / completion tokens | policy completion tokens | minutes |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['suite']} | {r['scheme']} | {r['held_out_before']:.3f} | {r['held_out_after']:.3f} | "
                     f"{r['mean_train_reward']:+.3f} | {r['judge_calls']} | {r['judge_prompt_tokens']} / "
                     f"{r['judge_completion_tokens']} | {r['policy_completion_tokens']} | {r['minutes']:.1f} |")
    return "\n".join(lines)


def write_results(rows: list[dict[str, Any]], curves: dict[str, list[float]], config: BenchConfig) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    tag = "quick" if config.steps <= 4 else "full"
    fig, axes = plt.subplots(1, len(config.suites), figsize=(6 * len(config.suites), 4), squeeze=False)
    for ax, suite in zip(axes[0], config.suites):
        for key, values in curves.items():
            if key.startswith(suite + ":"):
                ax.plot(range(1, len(values) + 1), values, marker="o", label=key.split(":", 1)[1])
        ax.set_title(f"{suite}: training reward per step (each scheme on its own scale)")
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / f"reward_schemes_{tag}.png", dpi=110)
    plt.close(fig)
    (out / f"reward_schemes_{tag}.md").write_text(
        f"Command: `{config.command}`\n\nJudge: `{config.judge}`{' at ' + config.api_base if config.api_base else ''}; "
        f"seed {config.seed}; {config.steps} steps of {config.groups_per_step} groups x {config.group_size}; "
        f"held-out tasks {config.eval_tasks}.\n\n{markdown_table(rows)}\n")
    (out / f"reward_schemes_{tag}.json").write_text(json.dumps({"config": config.__dict__, "rows": rows}, indent=2, default=str))
