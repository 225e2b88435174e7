"""The policy loss both algorithms use, and the statistics TRL and CleanRL log with it.

* :func:`clipped_token_loss`: per-token PPO-clip loss ``-min(r A, clip(r) A)``;
* :func:`k3_kl`: the k3 estimator of KL(policy || reference);
* :func:`aggregate`: a micro-batch's share of the batch loss (token / sequence / Dr. GRPO);
* :class:`LossStats`: approx-KL between the sampling and the current policy (CleanRL's
  ``(r - 1) - log r``), token entropy and clip fraction, accumulated over micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def clipped_token_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                       epsilon_low: float, epsilon_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss ``-min(r A, clip(r) A)`` and whether each token was clipped.

    Examples:
        >>> loss, clipped = clipped_token_loss(torch.tensor([0.0]), torch.tensor([-1.0]), torch.tensor([1.0]), 0.2, 0.2)
        >>> round(loss.item(), 3), clipped.tolist()
        (-1.2, [True])
    """
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high) * advantages
    return -torch.min(unclipped, clipped), (clipped < unclipped)


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(policy || reference): exp(d) - d - 1 with d = ref - policy."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1


def aggregate(token_loss: torch.Tensor, mask: torch.Tensor, loss_type: str, total_tokens: float,
              total_sequences: float, max_new_tokens: int) -> torch.Tensor:
    """Aggregate per-token losses of a micro-batch as its share of the whole batch's loss."""
    if loss_type == "token":
        return (token_loss * mask).sum() / max(total_tokens, 1.0)
    if loss_type == "sequence":
        per_sequence = (token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return per_sequence.sum() / max(total_sequences, 1.0)
    if loss_type == "dr_grpo":
        return (token_loss * mask).sum() / max(total_sequences * max_new_tokens, 1.0)
    raise ValueError(f"loss_type must be 'token', 'sequence' or 'dr_grpo', got {loss_type!r}")


@dataclass
class LossStats:
    """Token-weighted sums over micro-batches; :meth:`means` divides by the tokens seen."""

    tokens: float = 0.0
    approx_kl: float = 0.0
    entropy: float = 0.0
    clipped: float = 0.0

    @torch.no_grad()
    def add(self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor, clipped: torch.Tensor,
            entropy: torch.Tensor | None) -> None:
        log_ratio = (logprobs - old_logprobs) * mask
        self.tokens += float(mask.sum())
        self.approx_kl += float(((torch.exp(log_ratio) - 1 - log_ratio) * mask).sum())
        self.clipped += float((clipped.float() * mask).sum())
        if entropy is not None:
            self.entropy += float((entropy * mask).sum())

    def means(self) -> dict[str, float]:
        tokens = max(self.tokens, 1.0)
        return {"approx_kl": self.approx_kl / tokens, "entropy": self.entropy / tokens, "clip_fraction": self.clipped / tokens}
