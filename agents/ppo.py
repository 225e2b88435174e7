"""PPO, readable top to bottom: a value head on the policy's shared backbone, token-level GAE,
clipped policy and value losses, and advantages normalised separately per role (RLCER trains a
reasoner and a rubricator with one set of weights; their rewards live on different scales).

Each turn is its own sequence: its reward sits on its last completion token, values are read
from the backbone's last hidden state before each completion token, and GAE runs over that
turn's tokens (a rubricator turn does not bootstrap from the reasoner's, nor the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn as nn

from .config import AlgoConfig
from .losses import LossStats, clipped_token_loss
from .batching import micro_batches
from .policy import Policy
from .rollout import RolloutBatch


@dataclass
class PPOConfig(AlgoConfig):
    """Every PPO knob; the shared ones are :class:`AlgoConfig`'s (here: symmetric clip 0.2, two
    iterations per batch, micro-batches of 16)."""

    learning_rate: float = 1e-4
    """Actor (LoRA) learning rate."""
    num_iterations: int = 2
    """Optimisation passes (epochs) over each batch."""
    epsilon_high: float = 0.2
    """Upper clip of the ratio (symmetric with ``epsilon_low`` in classic PPO)."""
    micro_batch_size: int = 16
    value_learning_rate: float = 1e-3
    """Value head learning rate (RLCER uses a 10x higher critic rate)."""
    gamma: float = 1.0
    """Discount over the tokens of a turn."""
    lam: float = 0.95
    """GAE lambda."""
    value_clip: float = 0.2
    """Clip of the value update around the old value (0 turns it off)."""
    value_coef: float = 0.5
    """Weight of the value loss in the total loss."""
    normalize_per_role: bool = True
    """Normalise advantages within each role rather than over the whole batch."""


class ValueHead(nn.Module):
    """A scalar value from the backbone's last hidden state."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.float()).squeeze(-1)


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float):
    """Generalised advantage estimation along each row's masked (completion) tokens.

    ``values[t]`` estimates the return from token t on; the value after the last token is 0.

    Examples:
        >>> r = torch.tensor([[0., 0., 1.]]); v = torch.tensor([[0.5, 0.5, 0.5]]); m = torch.ones(1, 3)
        >>> adv, ret = gae(r, v, m, gamma=1.0, lam=1.0)
        >>> adv.tolist(), ret.tolist()
        ([[0.5, 0.5, 0.5]], [[1.0, 1.0, 1.0]])
    """
    advantages = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[0], device=rewards.device)
    next_value = torch.zeros(rewards.shape[0], device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = delta + gamma * lam * last
        advantages[:, t] = last * mask[:, t]
        # padding before the completion leaves the recursion untouched
        next_value = torch.where(mask[:, t] > 0, values[:, t], next_value)
        last = last * mask[:, t]
    return advantages, advantages + values * mask


def normalize_by_role(advantages: torch.Tensor, mask: torch.Tensor, roles: Sequence[str], per_role: bool) -> torch.Tensor:
    out = advantages.clone()
    groups = {r: [i for i, x in enumerate(roles) if x == r] for r in set(roles)} if per_role else {"all": list(range(len(roles)))}
    for rows in groups.values():
        values = advantages[rows][mask[rows] > 0]
        if values.numel() > 1:
            out[rows] = (advantages[rows] - values.mean()) / (values.std() + 1e-8) * mask[rows]
    return out


class PPO:
    """PPO updates of a :class:`Policy` (+ value head) from :class:`RolloutBatch` es."""

    def __init__(self, policy: Policy, config: PPOConfig | None = None):
        self.policy = policy
        self.config = config or PPOConfig()
        hidden = policy.model.config.hidden_size
        self.value_head = ValueHead(hidden).to(policy.device)
        self.optimizer = torch.optim.AdamW([
            {"params": policy.trainable_parameters(), "lr": self.config.learning_rate},
            {"params": self.value_head.parameters(), "lr": self.config.value_learning_rate},
        ], weight_decay=self.config.weight_decay)

    def _values(self, hidden: torch.Tensor) -> torch.Tensor:
        # the value of token t is read from the state before it (position t - 1), like its log-prob
        values = self.value_head(hidden)
        return torch.nn.functional.pad(values[:, :-1], (1, 0))

    def update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg = self.config
        samples = [t.sample for t in batch.turns]
        roles = [t.role for t in batch.turns]
        rewards_per_turn = [t.reward for t in batch.turns]
        chunks = []
        with torch.no_grad():  # old values, GAE, returns
            # batch_tensors reads every row whole: count them whole
            for part in micro_batches(samples, cfg.micro_batch_size, cfg.micro_batch_tokens, shared_prefix=False):
                start, chunk = part.start, samples[part.start:part.stop]
                tensors = self.policy.batch_tensors(chunk)
                logprobs, hidden = self.policy.token_logprobs(tensors, return_hidden=True)
                values = self._values(hidden)
                mask = tensors["completion_mask"]
                rewards = torch.zeros_like(values)
                rewards[:, -1] = torch.tensor(rewards_per_turn[start:start + len(chunk)], device=values.device)
                advantages, returns = gae(rewards, values * mask, mask, cfg.gamma, cfg.lam)
                old = self.policy.behaviour_logprobs(chunk, logprobs)
                chunks.append({"tensors": tensors, "old_logprobs": old, "old_values": values * mask,
                               "advantages": advantages, "returns": returns, "roles": roles[start:start + len(chunk)]})
        all_adv = torch.cat([torch.nn.functional.pad(c["advantages"], (max(x["advantages"].shape[1] for x in chunks)
                                                                        - c["advantages"].shape[1], 0)) for c in chunks])
        all_mask = torch.cat([torch.nn.functional.pad(c["tensors"]["completion_mask"], (all_adv.shape[1]
                                                                                         - c["tensors"]["completion_mask"].shape[1], 0)) for c in chunks])
        normalized = normalize_by_role(all_adv, all_mask, roles, cfg.normalize_per_role)
        row = 0
        for c in chunks:
            rows = c["advantages"].shape[0]
            c["advantages"] = normalized[row:row + rows, -c["advantages"].shape[1]:]
            row += rows
        total_tokens = float(all_mask.sum())
        stats = {"policy_loss": 0.0, "value_loss": 0.0}
        self.policy.model.train()
        for _ in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            token_stats = LossStats()  # of the last iteration, as TRL and CleanRL log them
            for c in chunks:
                mask = c["tensors"]["completion_mask"]
                scores = self.policy.score_tokens(c["tensors"], hidden=True, entropy=True)
                logprobs, values = scores.logprobs, self._values(scores.hidden)
                token_loss, clipped = clipped_token_loss(logprobs, c["old_logprobs"], c["advantages"],
                                                         cfg.epsilon_low, cfg.epsilon_high)
                token_stats.add(logprobs, c["old_logprobs"], mask, clipped, scores.entropy)
                value_error = (values - c["returns"]) ** 2
                if cfg.value_clip > 0:
                    clipped_values = c["old_values"] + (values - c["old_values"]).clamp(-cfg.value_clip, cfg.value_clip)
                    value_error = torch.max(value_error, (clipped_values - c["returns"]) ** 2)
                policy_loss = (token_loss * mask).sum() / total_tokens
                value_loss = 0.5 * (value_error * mask).sum() / total_tokens
                (policy_loss + cfg.value_coef * value_loss).backward()
                stats["policy_loss"] += policy_loss.item() / cfg.num_iterations
                stats["value_loss"] += value_loss.item() / cfg.num_iterations
            params = self.policy.trainable_parameters() + list(self.value_head.parameters())
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            self.optimizer.step()
        stats.update(token_stats.means(), loss=stats["policy_loss"] + cfg.value_coef * stats["value_loss"])
        for role in sorted(set(roles)):
            stats[f"reward_{role}"] = float(sum(r for r, x in zip(rewards_per_turn, roles) if x == role)
                                            / max(1, roles.count(role)))
        return stats

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "value_head": self.value_head.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.value_head.load_state_dict(state["value_head"])
