"""The knobs every policy-gradient algorithm here shares, as one dataclass that GRPO and PPO
extend (TRL's names where TRL has one: ``learning_rate``, ``num_iterations``, ``epsilon_low`` /
``epsilon_high``, ``max_grad_norm``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AlgoConfig:
    """Shared optimisation knobs (each algorithm's config extends this and may change defaults)."""

    learning_rate: float = 2e-4
    """LoRA wants about 10x the full fine-tune rate; 2e-4 learns single-digit sums fastest here."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimiser step."""
    num_iterations: int = 1
    """Optimisation passes over each batch (PPO's epochs; the ratio departs from 1 after the first)."""
    epsilon_low: float = 0.2
    """Lower clip of the probability ratio: 1 - epsilon_low."""
    epsilon_high: float = 0.28
    """Upper clip of the ratio: 1 + epsilon_high (clip-higher; PPO uses the symmetric 0.2)."""
    micro_batch_size: int = 8
    """Completions per forward/backward pass (gradients accumulate across micro-batches). The
    prefix a micro-batch's completions share (a group's prompt) is read once, so a micro-batch of
    a whole group pays: 8 made a CPU update of one group of 8 1.4x faster than 2 (2.98 s against
    4.13 s, benchmarks/grpo_vs_trl.py's setting); smaller ones bound the activation memory. On a GPU
    use 16 or more: 2 made an H200's update 4.4x slower (benchmarks/results/gpu_check.md)."""
    micro_batch_tokens: int = 4096
    """A pass also reads at most this many tokens (GRPO: the rows' shared prefix once, each row's
    padded rest; PPO, which reads every row whole: rows x the longest), taking fewer rows when
    transcripts are long; 0: no limit. Without it a pass of 8 of the
    shop's warm-start rows (``ToolUse-v0``, about 1,080 tokens each, none shared) grew past 24 GB
    on CPU and was killed."""
