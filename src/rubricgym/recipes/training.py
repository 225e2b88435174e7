"""Policy recipes: ``train``, ``eval``, ``sft`` and ``baseline``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from rubricgym.agents.policy import PolicyConfig
from rubricgym.agents.sft import SFTConfig
from rubricgym.agents.train import TrainConfig

from . import EnvSettings, JudgeSettings, judge_kwargs, recipe


@dataclass
class TrainRecipe:
    """``rubricgym train``: the training run, its env and judge."""

    env: EnvSettings = field(default_factory=EnvSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    train: TrainConfig = field(default_factory=TrainConfig)
    lr: float | None = None
    """Learning rate of either algorithm (default: the algorithm's)."""
    resume: bool = False
    """Continue from the latest checkpoint in --output-dir."""

    def train_config(self) -> TrainConfig:
        """The :class:`TrainConfig` these settings describe."""
        env_id = self.env.env_id()
        config = replace(self.train, env=env_id, env_kwargs={**self.env.env_kwargs, **judge_kwargs(env_id, self.judge)})
        if self.lr is not None:
            config.grpo = replace(config.grpo, learning_rate=self.lr)
            config.ppo = replace(config.ppo, learning_rate=self.lr)
        return config


@recipe(name="train", config=TrainRecipe, help="train the LLM policy by GRPO or PPO through the env loop",
        prefixes={"train.grpo": "grpo_", "train.ppo": "ppo_"}, skip=("train.env", "train.env_kwargs"))
def run_train(config: TrainRecipe) -> int:
    from rubricgym.agents.train import train

    settings = config.train_config()
    result = train(settings, resume=config.resume)
    if result.get("rank", 0):  # under torchrun only rank 0 reports
        return 0
    before = result["before"].get("eval_accuracy", float("nan"))
    after = result["after"].get("eval_accuracy", float("nan"))
    warm = result.get("warm_start", {}).get("warm_start_eval_accuracy")
    between = "" if warm is None else f" -> after the warm start {warm:.3f}"
    print(f"held-out accuracy: before {before:.3f}{between} -> after {after:.3f}   ({result['steps']} steps, "
          f"{result['minutes']:.1f} min; curve {result['plot']}; metrics {settings.output_dir}/metrics.jsonl)")
    return 0


@dataclass
class EvalRecipe:
    """``rubricgym eval``: held-out accuracy and pass@k of the base model or a checkpoint."""

    env: EnvSettings = field(default_factory=EnvSettings)
    checkpoint: str | None = None
    """A checkpoint folder written by rubricgym train (its model and adapter shape are used)."""
    tasks: int = 100
    """Held-out tasks evaluated."""
    k: str = "1"
    """Comma-separated: 1 = greedy accuracy, k > 1 = pass@k."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)

    def policy_config(self) -> PolicyConfig:
        """The policy: a checkpoint's own model and adapter shape, else the base model alone."""
        from rubricgym.agents.checkpoints import checkpoint_policy_config

        if not self.checkpoint:
            return replace(self.policy, lora_r=0)
        trained = checkpoint_policy_config(self.checkpoint)
        return replace(self.policy, **{k: v for k, v in trained.items()
                                       if k in ("model", "lora_r", "lora_alpha", "lora_target_modules")})


@recipe(name="eval", config=EvalRecipe, help="held-out accuracy and pass@k of the default model or a checkpoint")
def run_eval(config: EvalRecipe) -> int:
    from rubricgym.agents.checkpoints import load_adapter
    from rubricgym.agents.evaluation import evaluate
    from rubricgym.agents.policy import Policy
    from rubricgym.registration import check_env_kwargs, held_out

    policy_config = config.policy_config()
    env_id, kwargs = held_out(config.env.env_id(), config.env.env_kwargs)
    check_env_kwargs(env_id, kwargs)  # before the model loads
    policy = Policy(policy_config)
    if config.checkpoint:
        load_adapter(policy, config.checkpoint)
    for k in (int(x) for x in config.k.split(",")):
        result = evaluate(policy, kwargs, tasks=config.tasks, k=k, env_id=env_id, progress=True)
        print("  ".join(f"{key}={value:.3f}" for key, value in result.items()) + f"  (k={k}, {config.tasks} tasks)")
    return 0


@dataclass(kw_only=True)
class SFTRecipe:
    """``rubricgym sft``: supervised fine-tuning of the policy's LoRA on prompt-completion rows."""

    data: str
    """A JSONL / JSON / Parquet file of TRL prompt-completion rows."""
    output_dir: str
    """checkpoint-<steps> is written here."""
    max_rows: int = 0
    """Use the first k rows (0: all)."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)


@recipe(name="sft", config=SFTRecipe, help="supervised fine-tuning of the policy (LoRA) on prompt-completion rows: "
        "RLCER's cold start, a verifier or judge")
def run_sft(config: SFTRecipe) -> int:
    from rubricgym.agents.policy import Policy
    from rubricgym.agents.sft import sft
    from rubricgym.data import read_file

    rows = read_file(config.data)
    if config.max_rows:
        rows = rows[:config.max_rows]
    history = sft(Policy(config.policy), rows, config.sft, output_dir=config.output_dir)
    print(f"sft: {len(rows)} rows, {len(history)} steps, loss {history[0]['loss']:.3f} -> {history[-1]['loss']:.3f}; "
          f"checkpoint {config.output_dir}/checkpoint-{len(history)} (use it: --adapter, or --judge local:<checkpoint>)")
    return 0


@dataclass
class BaselineRecipe:
    """``rubricgym baseline``: scripted policies on Math-v0's built-in tasks."""

    policy: str = "calculator,estimate"
    """Comma-separated: calculator, estimate."""
    episodes: int = 120
    group_size: int = 4
    levels: str = "1,2,3,4,5,6"
    """Comma-separated generator levels."""
    seed: int = 0
    write_sft: str = ""
    """Instead of scoring: write the first policy's solved train-split episodes as SFT rows (JSONL, one per agent
    turn), the warm start of `rubricgym train --warm-start FILE`."""


@recipe(name="baseline", config=BaselineRecipe, help="run scripted baseline policies on Math-v0 (built-in data) and "
        "print accuracy")
def run_baseline(config: BaselineRecipe) -> int:
    from rubricgym.app.baseline import run_baseline as score
    from rubricgym.envs.math.scripted import POLICIES, scripted_sft_rows

    policies = config.policy.split(",")
    unknown = [name for name in policies if name not in POLICIES]
    if unknown:
        raise SystemExit(f"error: unknown policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    levels = tuple(int(x) for x in config.levels.split(","))
    if config.write_sft:
        rows = scripted_sft_rows(policies[0], episodes=config.episodes, seed=config.seed, env_kwargs={"levels": levels})
        Path(config.write_sft).parent.mkdir(parents=True, exist_ok=True)
        with open(config.write_sft, "w", encoding="utf-8") as out:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        print(f"wrote {len(rows)} SFT rows ({policies[0]}'s solved train-split episodes of {config.episodes}) to "
              f"{config.write_sft}; warm-start a run with them: rubricgym train --warm-start {config.write_sft} ...")
        return 0
    for policy in policies:
        result = score(policy, episodes=config.episodes, group_size=config.group_size, seed=config.seed, levels=levels)
        per_level = "  ".join(f"L{level}={acc:.2f}" for level, acc in result["by_level"].items())
        print(f"{policy:<12} accuracy={result['accuracy']:.3f} over {result['episodes']} episodes   {per_level}")
    return 0
