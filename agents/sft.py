"""Supervised fine-tuning of the policy (LoRA or full) on (prompt messages, completion) rows, in
one readable loop: the cross-entropy of the completion's tokens given the prompt, as the policy
encodes prompts for sampling (so a model fine-tuned here answers the same prompts it will see
in the env loop or as a judge). Distillation of a judge and the cold start of a rubric writer
both run through it.

Rows are TRL's conversational prompt-completion format, ``{"prompt": [messages], "completion":
[{"role": "assistant", "content": ...}]}``, or ``{"messages": [...], "completion": "text"}``.

Examples:
    >>> from rubricgym.agents.policy import Policy
    >>> rows = [{"messages": [{"role": "user", "content": "2+2?"}], "completion": "4"}]
    >>> history = sft(Policy(), rows, SFTConfig(epochs=1), output_dir="runs/sft")   # doctest: +SKIP
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from .checkpoints import save_checkpoint
from .batching import micro_batches
from .policy import Policy, Sample


@dataclass
class SFTConfig:
    """Every knob of :func:`sft`."""

    epochs: float = 2.0
    """Passes over the rows (a fraction stops part-way through the last pass)."""
    learning_rate: float = 2e-4
    """AdamW learning rate (LoRA wants about 10x a full fine-tune's)."""
    batch_size: int = 8
    """Rows per optimiser step."""
    micro_batch_size: int = 8
    """Rows per forward/backward pass (gradients accumulate up to ``batch_size``); the prompt
    prefix the rows of one pass share is read once, so larger passes save more."""
    micro_batch_tokens: int = 4096
    """A pass also reads at most this many tokens (fewer rows when rows are long; 0: no limit),
    as in the RL algorithms' :attr:`~rubricgym.agents.config.AlgoConfig.micro_batch_tokens`."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm."""
    max_completion_tokens: int = 512
    """Longer completions are cut (the end-of-turn token is kept)."""
    seed: int = 0
    """Seed of the row order."""
    eval_every: int = 0
    """Call ``on_eval`` every k optimiser steps (0: only at the end)."""


def sft_row(row: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The (prompt messages, completion text) of one row, in either accepted format."""
    prompt = row.get("prompt", row.get("messages"))
    completion = row.get("completion")
    if isinstance(completion, list):
        completion = "".join(m.get("content") or "" for m in completion if isinstance(m, dict))
    if not isinstance(prompt, list) or not prompt or not isinstance(completion, str):
        raise ValueError("an SFT row needs 'prompt' (or 'messages'), a list of chat messages, and 'completion', "
                         f"a string or a list of assistant messages; got keys {sorted(row)}")
    return prompt, completion


def encode_row(policy: Policy, row: dict[str, Any], max_completion_tokens: int) -> tuple[list[int], list[int]]:
    """Prompt ids (as the policy samples from them) and completion ids ending with the end-of-turn token."""
    prompt, completion = sft_row(row)
    completion_ids = policy.tokenizer.encode(completion, add_special_tokens=False)[:max_completion_tokens]
    return policy.encode_prompt(prompt), completion_ids + [policy.tokenizer.eos_token_id]


def sft(policy: Policy, rows: list[dict[str, Any]], config: SFTConfig | None = None, output_dir: str | Path | None = None,
        on_eval: Callable[[int], dict[str, float]] | None = None, progress: bool = True) -> list[dict[str, float]]:
    """Fine-tune ``policy`` on ``rows``; returns one record per optimiser step (loss, and what
    ``on_eval(step)`` returned where it ran); with ``output_dir``, saves ``checkpoint-<steps>``."""
    from tqdm import tqdm

    config = config or SFTConfig()
    encoded = [encode_row(policy, row, config.max_completion_tokens) for row in rows]
    order_rng = random.Random(config.seed)
    total = max(1, round(config.epochs * len(encoded) / config.batch_size))
    schedule: list[int] = []
    while len(schedule) < total * config.batch_size:
        epoch = list(range(len(encoded)))
        order_rng.shuffle(epoch)
        schedule += epoch
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=config.learning_rate)
    history: list[dict[str, float]] = []
    if on_eval is not None:
        history.append({"step": 0, **on_eval(0)})
    policy.model.train()
    for step in tqdm(range(1, total + 1), desc="sft", unit="step", disable=not progress):
        batch = schedule[(step - 1) * config.batch_size: step * config.batch_size]
        optimizer.zero_grad()
        loss_sum, tokens = 0.0, sum(len(encoded[i][1]) for i in batch)
        with policy.weights_lock:
            rows = [Sample(prompt_ids=list(p), completion_ids=list(c), logprobs=[], text="", truncated=False)
                    for p, c in (encoded[i] for i in batch)]
            for run in micro_batches(rows, config.micro_batch_size, config.micro_batch_tokens):
                # the prefix the rows share (a judge's instructions, a tool list) is read once
                scores, mask = policy.score_samples(rows[run.start:run.stop], temperature=1.0)
                # token-mean over the whole batch: long completions weigh by their length, as in TRL
                loss = -(scores.logprobs * mask).sum() / tokens
                loss.backward()
                loss_sum += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), config.max_grad_norm)
            optimizer.step()
            policy.version += 1
        record: dict[str, float] = {"step": step, "loss": loss_sum}
        if on_eval is not None and (step == total or (config.eval_every and step % config.eval_every == 0)):
            policy.model.eval()
            record.update(on_eval(step))
            policy.model.train()
        history.append(record)
    policy.model.eval()
    if output_dir is not None:
        save_checkpoint(Path(output_dir), total, policy, {"sft_history": history},
                        {"policy": policy.config, "sft": config, "rows": len(rows)})
    return history
