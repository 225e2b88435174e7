"""The training loop: rollouts through the env loop, GRPO or PPO updates; evaluation
(:mod:`.evaluation`), logs and plots (:mod:`.logs`) and checkpoints that resume exactly
(:mod:`.checkpoints`) live beside it.

    rubricgym train --env Math-v0 --algo grpo --steps 60 --group-size 8 --env-kwargs '{"levels": [1]}'
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rubricgym.openenv.client import served_variant
from rubricgym.registration import check_env_kwargs, default_env, held_out, training_kwargs, with_judge_correction

from . import distributed
from .checkpoints import (latest_checkpoint, load_adapter, load_trainer_state, plain_config, rng_state, save_checkpoint,
                          set_rng_state, set_seed)
from .diagnostics import reward_diagnostics, tool_use_stats
from .evaluation import evaluate, make_envs
from .grpo import GRPO, GRPOConfig
from .logs import GroupLog, MetricsLog, check_report_to
from .policy import Policy, PolicyConfig
from .ppo import PPO, PPOConfig
from .rollout import EnvWaves, collect_rollouts, collect_waves


@dataclass
class TrainConfig:
    """What to train, on what, for how long, and where the results go."""

    env: str = ""
    """A registered id (``rubricgym envs``; empty: the default family's base id); its group
    vector env provides the rollouts."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the env (the family's knobs, and the reward scheme's: judge, verifier,
    combine ...), over the family's training defaults; checked before the model loads."""
    env_servers: str = ""
    """Comma-separated OpenEnv servers (``rubricgym serve <base id>``, started with the run's family
    knobs) that play the training episodes instead of envs in this process, a group's members spread
    over them in turn; the reward scheme still scores whole groups here. Held-out evaluation stays
    in this process, on the base env."""
    judge_correction: str = ""
    """A judge's calibrated error profile (``rubricgym judge-eval --calibrate --output <file>``) that
    corrects the env's judge: the group read as often as the profile says, each score corrected
    (``correction`` of a RULER variant; :mod:`rubricgym.judges.correction`). Empty: none."""
    eval_env_kwargs: dict[str, Any] | None = None
    """Held-out env kwargs (of the base env); default: the family's held-out kwargs for ``env_kwargs``."""
    algo: Literal["grpo", "ppo"] = "grpo"
    """``grpo`` or ``ppo``."""
    steps: int = 30
    """Training steps (each: rollouts of every group, then one update)."""
    group_size: int = 8
    """Rollouts per task (GRPO's group; the judge compares these)."""
    groups_per_step: int = 4
    """Tasks per step."""
    seed: int = 0
    """Seed of the weights' LoRA init, the rollouts' sampling and the task draws."""
    output_dir: str = "runs/latest"
    """Where metrics.jsonl, reward_curve.png and the checkpoints go."""
    checkpoint_every: int = 20
    """Save a checkpoint every k steps (and always at the end); 0: only at the end."""
    eval_every: int = 0
    """Evaluate every k steps (0: only before and after)."""
    eval_tasks: int = 100
    """Held-out tasks per evaluation (greedy decoding)."""
    record_groups: int = 2
    """Groups of each step written to ``groups.jsonl`` for ``rubricgym view`` (-1: all, 0: none)."""
    report_to: tuple[str, ...] = ("tensorboard",)
    """Where metrics go besides metrics.jsonl: ``tensorboard``, ``wandb`` (Weights & Biases;
    ``WANDB_MODE=offline`` works without an account), or ``none``."""
    show_completions: int = 1
    """Completions printed under the progress bar each step, with their reward (as TRL logs them)."""
    rollout_server: str | None = None
    """Base URL (``.../v1``) of an OpenAI-compatible server that samples the rollouts (vLLM with
    ``--enable-lora``: the adapter is loaded into it after every update); None: in-process generate."""
    rollout_server_api: Literal["vllm", "openai"] = "vllm"
    """``vllm``: token-id prompts, sampled ids back, runtime LoRA loading; ``openai``: a plain
    server (llama.cpp), text prompts, fixed weights (agents/generation.py)."""
    rollout_waves: int = 1
    """Play each step's groups in this many waves (one group vector env each, groups per step /
    ranks divisible by it): with ``overlap_judging`` a wave's judge calls run while the other waves
    generate, and the waves' members share one batch per model call whatever turn each is at.
    Every member's turn is then seeded from (seed, wave, env step, member)."""
    overlap_judging: bool = True
    """With ``rollout_waves`` > 1: waves in threads, judging overlapping generation (benchmarks/overlap.py);
    off: the same waves one after the other (same samples, same rewards)."""
    wave_concurrency: int = 0
    """With ``rollout_waves`` > 1 and ``overlap_judging``: waves in flight at once (0: all). Fewer
    keep the batch full through a step of uneven episodes: a wave starts when one ends, and its
    first turns are sampled with the others' later turns (continuous batching)."""
    off_policy: bool = False
    """Generate step k+1's rollouts while step k trains (one step stale at most; ``rollout_staleness``
    is logged, and the clipped ratio is taken against the sampling log-probs). A resumed run
    regenerates the prefetched step, so resumes are not bit-exact with it."""
    warm_start: str = ""
    """A supervised warm start before RL, so a small model has seen the action format once (a tool
    call it would never write by chance): a JSONL of SFT rows (``rubricgym baseline --write-sft``,
    or any :mod:`.sft` rows), or ``scripted:<agent>`` to play the solved train-split episodes of one
    of the family's scripted agents on the training env (the math family's ``calculator``). Empty:
    none. Skipped on resume."""
    warm_start_steps: int = 4
    """SFT optimiser steps of the warm start (8 rows each); few, so that RL does the learning
    (benchmarks/learning.py: 4 steps give the calculator call its format, sampled calls stay rare)."""
    warm_start_learning_rate: float = 1e-3
    """AdamW learning rate of the warm start (a fresh optimiser; RL's own starts after it)."""
    warm_start_rows: int = 64
    """Episodes played by a ``scripted:`` warm start (each solved one gives a row per agent turn)."""
    rollout_retries: int = 2
    """Retries of a step's rollouts when the rollout server fails (after its own per-call
    retries): the step is played again from the same seed, never skipped."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)


class Trainer:
    """Owns the policy, the algorithm, the envs and the logs of one run."""

    def __init__(self, config: TrainConfig, policy: Policy | None = None):
        if config.algo not in ("grpo", "ppo"):
            raise ValueError(f"algo must be 'grpo' or 'ppo', got {config.algo!r}")
        config.env = config.env or default_env()
        if config.judge_correction:
            config.env_kwargs = with_judge_correction(config.env, config.env_kwargs, config.judge_correction)
        # an unknown id or knob fails here, before the model loads
        check_env_kwargs(config.env, training_kwargs(config.env, config.env_kwargs))
        check_report_to(config.report_to)
        self.config = config
        env_kwargs = training_kwargs(config.env, config.env_kwargs)
        self.ranks = distributed.setup()  # torchrun / accelerate launch: several ranks (agents/distributed.py)
        if self.ranks.active and config.algo != "grpo":
            raise ValueError("several ranks train GRPO only (PPO's value head is not synchronised); use --algo grpo")
        self.local_groups = distributed.local_groups(config.groups_per_step, self.ranks)
        set_seed(config.seed)
        self.policy = policy or Policy(config.policy, generator=self._generator(config))
        distributed.broadcast_parameters(self.policy.trainable_parameters(), self.ranks)
        if self.ranks.active:  # same init everywhere, then each rank its own sampling noise
            set_seed(config.seed + 7919 * self.ranks.rank)
        self.algo = GRPO(self.policy, config.grpo, self.ranks) if config.algo == "grpo" else PPO(self.policy, config.ppo)
        if config.rollout_waves < 1 or self.local_groups % config.rollout_waves:
            raise ValueError(f"rollout_waves ({config.rollout_waves}) must divide the groups each rank plays per step "
                             f"({self.local_groups})")
        per_wave = config.group_size * self.local_groups // config.rollout_waves
        rollout_env = config.env
        if config.env_servers:  # the episodes are played on the servers, the groups scored here
            rollout_env, env_kwargs = served_variant(config.env, env_kwargs, config.env_servers)
        self.envs = make_envs(rollout_env, per_wave, config.group_size, env_kwargs) if config.rollout_waves == 1 \
            else EnvWaves(make_envs(rollout_env, per_wave, config.group_size, env_kwargs)
                          for _ in range(config.rollout_waves))
        self._prefetch: Any = None  # off-policy: the next step's rollouts, in flight
        self.step = 0
        self.out = Path(config.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        main = self.ranks.main  # metrics, groups, plots and checkpoints come from rank 0
        self.logs = MetricsLog(self.out, report_to=config.report_to if main else (), run_config=plain_config(config))
        self.group_log = GroupLog(self.out, config.record_groups if main else 0)

    @staticmethod
    def _generator(config: TrainConfig):
        if config.rollout_server is None:
            return None
        from .generation import ServerConfig, ServerGenerator

        return ServerGenerator(ServerConfig(url=config.rollout_server, api=config.rollout_server_api))

    def _rollouts(self, step: int | None = None):
        """Rollouts of ``step`` (default: the current one); a rollout server that fails is retried
        (same seed), then a clear error."""
        from .generation import RolloutServerError

        for attempt in range(self.config.rollout_retries + 1):
            try:
                if not getattr(self, "_generator_synced", False):  # a fresh or resumed run: serve these weights
                    self.policy.sync_generator(self.step)
                    self._generator_synced = True
                # rank r plays the groups a single process would play at group indices r*k ... r*k + k - 1
                first_group = self.ranks.rank * self.local_groups
                step = self.step if step is None else step
                seed = self.config.seed * 100_003 + step + first_group * self.config.group_size
                if isinstance(self.envs, EnvWaves):
                    return collect_waves(self.envs, self.policy, seed, overlap=self.config.overlap_judging,
                                         concurrency=self.config.wave_concurrency)
                return collect_rollouts(self.envs, self.policy, seed=seed)
            except RolloutServerError as err:
                if attempt == self.config.rollout_retries:
                    raise RolloutServerError(f"step {self.step} not trained (the run stays at step {self.step}; "
                                             f"resume when the server is back): {err}") from err
                print(f"step {self.step}: rollout server failed ({err}); playing the step again", flush=True)
        raise AssertionError("unreachable")

    def _sync_after_update(self) -> dict[str, float]:
        from .generation import RolloutServerError

        try:
            return self.policy.sync_generator(self.step + 1)
        except RolloutServerError as err:  # the update is kept; the next step's rollouts load it again first
            self._generator_synced = False
            print(f"step {self.step}: loading the adapter into the rollout server failed ({err}); "
                  "it is loaded again before the next rollouts", flush=True)
            return {"adapter_reload_failed": 1.0}

    def warm_start_rows(self) -> list[dict[str, Any]]:
        """The warm start's SFT rows (``warm_start``: a JSONL file or ``scripted:<policy>``)."""
        source = self.config.warm_start
        if source.startswith("scripted:"):
            from rubricgym.registration import family_class, split_kwargs

            family = family_class(self.config.env)
            if family is None:
                raise ValueError(f"warm_start {source!r}: {self.config.env} is not a rubricgym family (no scripted agents); "
                                 "give a JSONL file of SFT rows instead")
            kwargs, _ = split_kwargs(self.config.env, training_kwargs(self.config.env, self.config.env_kwargs))
            rows = family.scripted_sft_rows(source.split(":", 1)[1], episodes=self.config.warm_start_rows, seed=self.config.seed,
                            env_kwargs=kwargs)
        else:
            from rubricgym.data import load_records

            rows = load_records(source)
        if not rows:
            raise ValueError(f"warm_start {source!r} gave no SFT rows")
        return rows

    def warm_start(self) -> dict[str, float]:
        """SFT on :meth:`warm_start_rows` for ``warm_start_steps`` steps; returns the last loss and the time."""
        from .sft import SFTConfig, sft

        started = time.perf_counter()
        rows = self.warm_start_rows()
        config = SFTConfig(epochs=self.config.warm_start_steps * 8 / len(rows), batch_size=8,
                           learning_rate=self.config.warm_start_learning_rate, seed=self.config.seed)
        history = sft(self.policy, rows, config, progress=self.ranks.main)
        self.policy.sync_generator(self.step)
        return {"warm_start_loss": history[-1]["loss"], "warm_start_rows": float(len(rows)),
                "warm_start_seconds": time.perf_counter() - started}

    @property
    def history(self) -> list[dict[str, float]]:
        return self.logs.history

    # -- one step -------------------------------------------------------------------------------

    def train_step(self) -> dict[str, float]:
        start = time.perf_counter()
        prefetched = self._prefetch is not None
        if prefetched:  # off-policy: generated while the previous step trained
            batch, self._prefetch = self._prefetch.result(), None
        else:
            batch = self._rollouts()
        rollout_s = time.perf_counter() - start
        if self.config.off_policy and self.step + 1 < self.config.steps:
            from concurrent.futures import ThreadPoolExecutor

            self._prefetcher = getattr(self, "_prefetcher", None) or ThreadPoolExecutor(1, thread_name_prefix="rubricgym-next")
            self._prefetch = self._prefetcher.submit(self._rollouts, self.step + 1)
        stats = self.algo.update(batch)
        stats.update(self._sync_after_update())
        self.group_log.log(batch.groups, self.step)
        self.last_batch = batch
        completion_tokens = sum(len(t.sample.completion_ids) for t in batch.turns)
        stats.update(step=self.step, reward=float(np.mean(batch.episode_rewards)),
                     train_accuracy=float(np.mean(batch.episode_correct)), completion_tokens=float(completion_tokens),
                     mean_completion_tokens=completion_tokens / max(1, len(batch.turns)),
                     rollout_seconds=rollout_s, step_seconds=time.perf_counter() - start,
                     rollouts_prefetched=float(prefetched))
        stats["judge_failed_groups"] = float(sum(bool(i.get("group_failed")) for i in batch.infos))
        stats.update(reward_diagnostics(batch.groups))
        stats.update(tool_use_stats(batch.groups))
        if "trained_completions" in stats and batch.turns:
            stats["trained_fraction"] = stats["trained_completions"] / len(batch.turns)
        group_rows = [i["group_stats"] for i in batch.infos if isinstance(i.get("group_stats"), dict)]
        for key in sorted({k for row in group_rows for k in row}):  # the scorer's own statistics, e.g. rubric_valid_fraction
            stats[key] = float(np.mean([row[key] for row in group_rows if key in row]))
        stats = distributed.combine_stats(distributed.gather(stats, self.ranks))
        self.step += 1
        return stats

    def log(self, stats: dict[str, float]) -> None:
        if self.ranks.main:
            self.logs.log(stats)

    def plot(self, path: Path | None = None, title: str | None = None) -> Path:
        return self.logs.plot(path or self.out / "reward_curve.png", title or f"{self.config.algo.upper()} on {self.config.env}")

    # -- checkpoints ----------------------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        """Rank 0 writes (every rank's RNG state included, so a resumed multi-rank run continues exactly)."""
        rngs = distributed.gather(rng_state(), self.ranks)
        folder = self.out / f"checkpoint-{self.step}"
        if self.ranks.main:
            folder = save_checkpoint(self.out, self.step, self.policy,
                                     {"algo": self.algo.state_dict(), "history": self.history, "rng_per_rank": rngs},
                                     self.config)
        distributed.barrier(self.ranks)
        return folder

    def load_checkpoint(self, folder: str | Path) -> None:
        load_adapter(self.policy, folder)
        state = load_trainer_state(folder)
        per_rank = state.get("rng_per_rank") or []
        if len(per_rank) == self.ranks.world:
            set_rng_state(per_rank[self.ranks.rank])
        elif self.ranks.active:
            raise ValueError(f"{folder} was saved by {len(per_rank) or 1} rank(s); resume it with as many")
        self.algo.load_state_dict(state["algo"])
        self.step = state["step"]
        if self.ranks.main:
            self.logs.restore(state["history"])
        else:
            self.logs.history = list(state["history"])
        if self.ranks.main:
            self.group_log.restore(self.step)
        self._generator_synced = False

    latest_checkpoint = staticmethod(latest_checkpoint)

    # -- the run --------------------------------------------------------------------------------

    def evaluate(self, progress: bool = False) -> dict[str, float]:
        """Held-out accuracy (rank 0 evaluates, the other ranks wait and get {})."""
        if not self.ranks.main:
            distributed.barrier(self.ranks)
            return {}
        env_id, kwargs = held_out(self.config.env, self.config.env_kwargs)
        kwargs = self.config.eval_env_kwargs or kwargs
        result = evaluate(self.policy, kwargs, tasks=self.config.eval_tasks, env_id=env_id, progress=progress)
        distributed.barrier(self.ranks)
        return {f"eval_{key}": value for key, value in result.items() if key != "solved"}

    def run(self, progress: bool = True) -> dict[str, Any]:
        from tqdm import tqdm

        cfg = self.config
        started = time.perf_counter()
        before = self.evaluate(progress) if cfg.eval_tasks else {}
        if before:
            self.log({"step": self.step, **before})
        warm: dict[str, float] = {}
        if cfg.warm_start and self.step == 0:  # a resumed run's adapter already holds it
            warm = self.warm_start()
            if cfg.eval_tasks:
                warm.update({f"warm_start_{key}": value for key, value in self.evaluate(progress).items()})
            self.log({"step": 0, **warm})
        progress = progress and self.ranks.main
        bar = tqdm(total=cfg.steps, initial=self.step, desc=f"{cfg.algo} {cfg.env}", disable=not progress)
        saved_at = None
        while self.step < cfg.steps:
            stats = self.train_step()
            self.log(stats)
            bar.update(1)
            bar.set_postfix(reward=f"{stats['reward']:.2f}", acc=f"{stats['train_accuracy']:.2f}",
                            tokens=f"{stats['mean_completion_tokens']:.0f}", judge_failed=int(stats["judge_failed_groups"]))
            for turn in self.last_batch.turns[: cfg.show_completions] if progress else []:
                text = " ".join(turn.sample.text.split())
                bar.write(f"  step {self.step - 1} {turn.role} (return {turn.reward:+.2f}): {text[:160]}")
            if cfg.eval_every and self.step % cfg.eval_every == 0 and self.step < cfg.steps:
                self.log({"step": self.step, **self.evaluate(progress)})
            if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0 and self.step < cfg.steps:
                self.save_checkpoint()
                saved_at = self.step
        bar.close()
        after = self.evaluate(progress) if cfg.eval_tasks else {}
        if after:
            self.log({"step": self.step, **after})
        if saved_at != self.step:  # one save per step: the final one carries the final evaluation
            self.save_checkpoint()
        plot = self.plot() if self.ranks.main else None
        self.logs.close()
        return {"before": before, "after": after, "warm_start": warm, "minutes": (time.perf_counter() - started) / 60,
                "plot": str(plot), "steps": self.step}


def train(config: TrainConfig, resume: bool = False) -> dict[str, Any]:
    trainer = Trainer(config)
    if resume:
        latest = latest_checkpoint(config.output_dir)
        if latest is None:
            raise FileNotFoundError(f"no complete checkpoint to resume in {config.output_dir}")
        trainer.load_checkpoint(latest)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return {**trainer.run(), "rank": trainer.ranks.rank}
    finally:
        distributed.teardown(trainer.ranks)
