"""The training loop: rollouts through the env loop, GRPO or PPO updates, evaluation, logs,
plots and checkpoints that resume exactly.

    rubricgym train --env Math-v0 --algo grpo --steps 60 --group-size 8 --levels 1
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rubricgym.registration import base_env_id

from .grpo import GRPO, GRPOConfig
from .policy import Policy, PolicyConfig
from .ppo import PPO, PPOConfig
from .rollout import collect_rollouts


@dataclass
class TrainConfig:
    """What to train, on what, for how long, and where the results go."""

    env: str = "Math-v0"
    """A registered id; its group vector env provides the rollouts."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: {"levels": (1,)})
    """Keyword arguments of the env (dataset, levels, tools, judge, verifier ...)."""
    eval_env_kwargs: dict[str, Any] | None = None
    """Held-out env kwargs; default: ``env_kwargs`` with ``split="test"`` and no reward wrappers' judges."""
    algo: str = "grpo"
    """``grpo`` or ``ppo``."""
    steps: int = 60
    group_size: int = 8
    groups_per_step: int = 4
    seed: int = 0
    output_dir: str = "runs/latest"
    checkpoint_every: int = 20
    eval_every: int = 0
    """Evaluate every k steps (0: only before and after)."""
    eval_tasks: int = 100
    """Held-out tasks per evaluation (greedy decoding)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def make_envs(env_id: str, num_envs: int, group_size: int, kwargs: dict[str, Any]):
    import gymnasium as gym

    import rubricgym  # noqa: F401  (registers the ids)

    return gym.make_vec(env_id, num_envs=num_envs, group_size=group_size, **kwargs)


def evaluate(policy: Policy, env_kwargs: dict[str, Any], tasks: int = 100, k: int = 1, seed: int = 12345,
             env_id: str = "Math-v0", batch_groups: int = 16) -> dict[str, float]:
    """Held-out accuracy (greedy, k=1) or pass@k (k samples at the policy's temperature) and mean reward."""
    greedy = k == 1
    correct_any, rewards = [], []
    envs = make_envs(env_id, num_envs=batch_groups * k, group_size=k, kwargs=env_kwargs)
    done = 0
    while done < tasks:
        batch = collect_rollouts(envs, policy, seed=seed + done, greedy=greedy)
        per_group: dict[int, list[bool]] = {}
        for index, c in enumerate(batch.episode_correct):
            per_group.setdefault(index // k, []).append(c)
        for g, values in per_group.items():
            if done + g < tasks:
                correct_any.append(any(values))
        rewards.extend(batch.episode_rewards)
        done += batch_groups
    envs.close()
    key = "accuracy" if greedy else f"pass@{k}"
    return {key: float(np.mean(correct_any)), "mean_reward": float(np.mean(rewards))}


def default_eval_kwargs(config: TrainConfig) -> dict[str, Any]:
    kwargs = dict(config.env_kwargs)
    if kwargs.get("dataset", "generated") == "generated":
        kwargs["split"] = "test"
    for judge_knob in ("judge", "verifier", "rubricator", "api_base", "combine", "rubrics_per_group", "rubric_hints"):
        kwargs.pop(judge_knob, None)
    return kwargs


class Trainer:
    """Owns the policy, the algorithm, the envs and the logs of one run."""

    def __init__(self, config: TrainConfig, policy: Policy | None = None):
        self.config = config
        set_seed(config.seed)
        self.policy = policy or Policy(config.policy)
        self.algo = GRPO(self.policy, config.grpo) if config.algo == "grpo" else PPO(self.policy, config.ppo)
        if config.algo not in ("grpo", "ppo"):
            raise ValueError(f"algo must be 'grpo' or 'ppo', got {config.algo!r}")
        self.envs = make_envs(config.env, config.group_size * config.groups_per_step, config.group_size, config.env_kwargs)
        self.step = 0
        self.out = Path(config.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.history: list[dict[str, float]] = []
        self._tensorboard = None

    # -- one step -------------------------------------------------------------------------------

    def train_step(self) -> dict[str, float]:
        start = time.perf_counter()
        batch = collect_rollouts(self.envs, self.policy, seed=self.config.seed * 100_003 + self.step)
        rollout_s = time.perf_counter() - start
        stats = self.algo.update(batch)
        completion_tokens = sum(len(t.sample.completion_ids) for t in batch.turns)
        stats.update(step=self.step, reward=float(np.mean(batch.episode_rewards)),
                     train_accuracy=float(np.mean(batch.episode_correct)), completion_tokens=float(completion_tokens),
                     mean_completion_tokens=completion_tokens / max(1, len(batch.turns)),
                     rollout_seconds=rollout_s, step_seconds=time.perf_counter() - start)
        stats["judge_failed_groups"] = float(sum(bool(i.get("ruler_failed")) for i in batch.infos))
        rubric_rows = [i["rubric_stats"] for i in batch.infos if isinstance(i.get("rubric_stats"), dict)]
        for key in ("valid_fraction", "mean_valid_corr", "mean_cot_reward", "num_items"):
            if rubric_rows:
                stats[f"rubric_{key}"] = float(np.mean([r[key] for r in rubric_rows]))
        self.step += 1
        return stats

    # -- logs -----------------------------------------------------------------------------------

    def log(self, stats: dict[str, float]) -> None:
        self.history.append(stats)
        with open(self.out / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(stats) + "\n")
        if self._tensorboard is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tensorboard = SummaryWriter(str(self.out / "tensorboard"))
            except Exception:  # tensorboard not installed: JSONL and the PNG still have everything
                self._tensorboard = False
        if self._tensorboard:
            for key, value in stats.items():
                if isinstance(value, (int, float)) and key != "step" and math.isfinite(value):
                    self._tensorboard.add_scalar(key, value, int(stats.get("step", self.step)))

    def plot(self, path: Path | None = None, title: str | None = None) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = path or self.out / "reward_curve.png"
        rows = [h for h in self.history if "reward" in h]
        evals = [h for h in self.history if "eval_accuracy" in h]
        fig, ax = plt.subplots(figsize=(7, 4))
        if rows:
            steps = [r["step"] for r in rows]
            rewards = [r["reward"] for r in rows]
            ax.plot(steps, rewards, alpha=0.35, label="training reward")
            window = max(1, len(rewards) // 15)
            smooth = np.convolve(rewards, np.ones(window) / window, mode="valid")
            ax.plot(steps[window - 1:], smooth, label=f"training reward ({window}-step mean)")
        if evals:
            ax2 = ax.twinx()
            ax2.plot([e["step"] for e in evals], [e["eval_accuracy"] for e in evals], "o-", color="black", label="held-out accuracy")
            ax2.set_ylim(0, 1.05)
            ax2.set_ylabel("held-out accuracy")
            ax2.legend(loc="lower right")
        ax.set_xlabel("step")
        ax.set_ylabel("reward")
        ax.set_title(title or f"{self.config.algo.upper()} on {self.config.env}")
        ax.legend(loc="upper left")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path

    # -- checkpoints ----------------------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        folder = self.out / f"checkpoint-{self.step}"
        folder.mkdir(parents=True, exist_ok=True)
        if self.policy.has_adapter:
            self.policy.model.save_pretrained(folder / "adapter")
        else:
            torch.save(self.policy.model.state_dict(), folder / "model.pt")
        config = asdict(self.config)
        torch.save({"algo": self.algo.state_dict(), "rng": rng_state(), "step": self.step, "config": config,
                    "history": self.history}, folder / "trainer.pt")
        (folder / "config.json").write_text(json.dumps(config, indent=2, default=str))
        (self.out / "latest").write_text(folder.name)
        return folder

    def load_checkpoint(self, folder: str | Path) -> None:
        folder = Path(folder)
        if (folder / "adapter").is_dir():
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            weights = load_file(str(folder / "adapter" / "adapter_model.safetensors"))
            set_peft_model_state_dict(self.policy.model, weights)
        else:
            self.policy.model.load_state_dict(torch.load(folder / "model.pt"))
        state = torch.load(folder / "trainer.pt", weights_only=False)
        self.algo.load_state_dict(state["algo"])
        set_rng_state(state["rng"])
        self.step = state["step"]
        self.history = state["history"]

    @staticmethod
    def latest_checkpoint(output_dir: str | Path) -> Path | None:
        marker = Path(output_dir) / "latest"
        return Path(output_dir) / marker.read_text().strip() if marker.is_file() else None

    # -- the run --------------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        kwargs = self.config.eval_env_kwargs or default_eval_kwargs(self.config)
        base_env = base_env_id(self.config.env)  # held-out accuracy is the base env's verified outcome
        result = evaluate(self.policy, kwargs, tasks=self.config.eval_tasks, env_id=base_env)
        return {"eval_accuracy": result["accuracy"], "eval_mean_reward": result["mean_reward"]}

    def run(self, progress: bool = True) -> dict[str, Any]:
        from tqdm import tqdm

        cfg = self.config
        started = time.perf_counter()
        before = self.evaluate() if cfg.eval_tasks else {}
        if before:
            self.log({"step": self.step, **before})
        bar = tqdm(total=cfg.steps, initial=self.step, desc=f"{cfg.algo} {cfg.env}", disable=not progress)
        while self.step < cfg.steps:
            stats = self.train_step()
            self.log(stats)
            bar.update(1)
            bar.set_postfix(reward=f"{stats['reward']:.2f}", acc=f"{stats['train_accuracy']:.2f}",
                            tokens=f"{stats['mean_completion_tokens']:.0f}")
            if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                self.log({"step": self.step, **self.evaluate()})
            if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                self.save_checkpoint()
        bar.close()
        after = self.evaluate() if cfg.eval_tasks else {}
        if after:
            self.log({"step": self.step, **after})
        self.save_checkpoint()
        plot = self.plot()
        return {"before": before, "after": after, "minutes": (time.perf_counter() - started) / 60, "plot": str(plot),
                "steps": self.step}


def train(config: TrainConfig, resume: bool = False) -> dict[str, Any]:
    trainer = Trainer(config)
    if resume:
        latest = Trainer.latest_checkpoint(config.output_dir)
        if latest is None:
            raise FileNotFoundError(f"no checkpoint to resume in {config.output_dir}")
        trainer.load_checkpoint(latest)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return trainer.run()
