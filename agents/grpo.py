"""GRPO, readable top to bottom: group-normalised advantages, a clipped token-level loss,
an optional k3 KL to the reference (the same weights with the adapter disabled), several inner
iterations, zero-variance groups skipped and counted, truncated completions optionally masked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch

from .config import AlgoConfig
from .distributed import Ranks, sum_gradients, sum_scalar
from .generation import drift_stats
from .losses import LossStats, aggregate, clipped_token_loss, k3_kl
from .batching import completion_logprobs, micro_batches
from .policy import Policy
from .rollout import RolloutBatch, Turn


@dataclass
class GRPOConfig(AlgoConfig):
    """Every GRPO knob, named, typed and defaulted (defaults measured on the 2-core CPU machine);
    the shared ones (learning rate, clipping, iterations, micro-batches) are :class:`AlgoConfig`'s."""

    scale_rewards: Literal["group", "batch", "none"] = "group"
    """Divide advantages by the group's std, the batch's std, or nothing (Dr. GRPO)."""
    loss_type: Literal["token", "sequence", "dr_grpo"] = "token"
    """``token``: mean over all completion tokens of the batch (DAPO); ``sequence``: mean per
    completion, then over completions; ``dr_grpo``: sum / (completions x max_new_tokens)."""
    beta: float = 0.0
    """Weight of the k3 KL to the reference (adapter disabled); 0 skips the reference pass."""
    mask_truncated: bool = False
    """Leave completions that hit the token limit out of the loss."""
    advantage_eps: float = 1e-4
    """Added to the std before dividing (TRL's 1e-4)."""
    min_group_std: float = 0.0
    """With group scaling, divide by ``max(std, min_group_std)``: near-equal judge scores (1.0 vs
    0.9999) then give near-zero advantages instead of full-size ones. 0 = TRL's behaviour, the
    default: 0.25 under a simulated 0.7 judge did worse (held-out 0.42 against 0.59, 2 seeds;
    benchmarks/judge_sensitivity.py --floors); e.g. 0.05 for 0..1 judge scores."""


def group_advantages(rewards: torch.Tensor, group_ids: Sequence[int], scale: str = "group",
                     eps: float = 1e-4, min_std: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages ``(r - group mean) / scale`` and the mask of zero-variance groups; with group
    scaling the std is floored at ``min_std``.

    Examples:
        >>> adv, zero = group_advantages(torch.tensor([1., 0., 1., 1.]), [0, 0, 1, 1])
        >>> [round(a, 3) for a in adv.tolist()], zero.tolist()
        ([0.707, -0.707, 0.0, 0.0], [False, False, True, True])
        >>> [round(a, 3) for a in group_advantages(torch.tensor([1.0, 0.9999]), [0, 0], min_std=0.05)[0].tolist()]
        [0.001, -0.001]
    """
    rewards = rewards.float()
    groups = torch.as_tensor(list(group_ids))
    advantages = torch.zeros_like(rewards)
    zero_variance = torch.zeros_like(rewards, dtype=torch.bool)
    for g in groups.unique():
        members = groups == g
        values = rewards[members]
        centered = values - values.mean()
        std = values.std(unbiased=True) if len(values) > 1 else torch.tensor(0.0)
        zero_variance[members] = bool(std == 0)
        if std == 0:
            continue  # no signal in this group: advantage 0 (and no 0/0 when eps is 0)
        advantages[members] = centered / (max(std, min_std) + eps) if scale == "group" else centered
    if scale == "batch":
        advantages = advantages / (rewards.std(unbiased=True) + eps)
    elif scale not in ("group", "none"):
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale!r}")
    return advantages, zero_variance


class GRPO:
    """GRPO updates of a :class:`Policy` from :class:`RolloutBatch` es."""

    def __init__(self, policy: Policy, config: GRPOConfig | None = None, ranks: Ranks | None = None):
        self.policy = policy
        self.config = config or GRPOConfig()
        self.ranks = ranks or Ranks()
        if self.ranks.active and self.config.scale_rewards == "batch":
            raise ValueError("scale_rewards='batch' needs every rank's rewards; use 'group' or 'none' with several ranks")
        self.optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=self.config.learning_rate,
                                           weight_decay=self.config.weight_decay)

    def advantages(self, turns: Sequence[Turn]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-turn advantages, normalised within each (group, role)."""
        keys = [(t.group, t.role) for t in turns]
        ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        rewards = torch.tensor([t.reward for t in turns])
        return group_advantages(rewards, [ids[k] for k in keys], self.config.scale_rewards, self.config.advantage_eps,
                                self.config.min_group_std)

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg = self.config
        turns = list(batch.turns)
        advantages, zero_variance = self.advantages(turns)
        keep = [i for i, t in enumerate(turns) if not zero_variance[i] and not (cfg.mask_truncated and t.sample.truncated)]
        stats = {"zero_variance_groups": float(len({(t.group, t.role) for t, z in zip(turns, zero_variance) if z})),
                 "groups": float(len({(t.group, t.role) for t in turns})), "loss": 0.0, "kl": 0.0, "clip_fraction": 0.0,
                 "approx_kl": 0.0, "entropy": 0.0, "trained_completions": float(len(keep))}
        # with several ranks every decision and normaliser is global, so the summed gradient is the one-process one
        if not sum_scalar(len(keep), self.ranks):  # every group had one reward for all: no gradient this step
            return stats
        samples = [turns[i].sample for i in keep]
        stats["rollout_staleness"] = sum(self.policy.version - s.meta.get("version", self.policy.version)
                                         for s in samples) / len(samples) if samples else 0.0
        adv = advantages[keep]
        total_tokens = sum_scalar(float(sum(len(s.completion_ids) for s in samples)), self.ranks)
        total_sequences = sum_scalar(float(len(samples)), self.ranks)
        max_new = self.policy.config.max_new_tokens
        self.policy.model.train()
        olds: dict[int, torch.Tensor] = {}  # the old policy's log-probs, fixed across iterations
        server_samples, trainer_logprobs = [], []  # drift check of a server's log-probs
        for iteration in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum = kl_sum = 0.0
            token_stats = LossStats()  # of the last iteration, as TRL and CleanRL log them
            for part in micro_batches(samples, cfg.micro_batch_size, cfg.micro_batch_tokens):
                chunk = samples[part.start:part.stop]
                chunk_adv = adv[part.start:part.stop].to(self.policy.device)
                scores, mask = self.policy.score_samples(chunk, entropy=True)  # a shared prompt read once
                logprobs = scores.logprobs
                old = olds.setdefault(part.start, self.policy.behaviour_logprobs(chunk, logprobs))
                if iteration == 0 and chunk[0].meta.get("logprobs_from") == "server":
                    server_samples += chunk
                    trainer_logprobs += completion_logprobs(chunk, logprobs)
                token_loss, clipped = clipped_token_loss(logprobs, old, chunk_adv[:, None], cfg.epsilon_low, cfg.epsilon_high)
                if cfg.beta > 0:
                    kl = k3_kl(logprobs, self.policy.reference_logprobs(chunk))
                    token_loss = token_loss + cfg.beta * kl
                    kl_sum += float((kl * mask).sum())
                loss = aggregate(token_loss, mask, cfg.loss_type, total_tokens, total_sequences, max_new)
                loss.backward()
                loss_sum += loss.item()
                token_stats.add(logprobs, old, mask, clipped, scores.entropy)
            sum_gradients(self.policy.trainable_parameters(), self.ranks)
            torch.nn.utils.clip_grad_norm_(self.policy.trainable_parameters(), cfg.max_grad_norm)
            with self.policy.weights_lock:  # never while an off-policy rollout samples
                self.optimizer.step()
                self.policy.version += 1
        stats.update(loss=loss_sum, kl=kl_sum / total_tokens, **token_stats.means(),
                     **drift_stats(server_samples, trainer_logprobs))
        return stats

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
