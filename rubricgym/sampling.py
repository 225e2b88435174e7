"""Sampling from a causal LM with the log-probs of the sampled tokens, shared by our policy
(``rubricgym.agents.policy``) and the adapters that sample with another trainer's model
(``rubricgym.integrations.trl``). torch is imported when a function is called.

Examples:
    >>> stop_token_ids(type("T", (), {"eos_token_id": 2, "convert_tokens_to_ids": lambda self, t: 7})())
    [2, 7]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass
class Generated:
    """One sampled completion: its token ids, their log-probs under the sampling distribution,
    its text, and whether it ended on a stop token (False: cut at the token budget)."""

    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finished: bool


def stop_token_ids(tokenizer: Any) -> list[int]:
    """The ids that end a completion: the tokenizer's eos and the chat template's ``<|im_end|>``."""
    return sorted({i for i in (tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>"))
                   if isinstance(i, int) and i >= 0})


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int, device: Any = "cpu"):
    """Left-padded ids and attention mask (generation appends on the right)."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq):] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return ids.to(device), mask.to(device)


def generate_with_logprobs(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                           temperature: float = 1.0, top_p: float | None = None, greedy: bool = False,
                           stop_ids: Sequence[int] | None = None) -> list[Generated]:
    """One completion per token prompt, in eval mode (the caller restores training mode); each
    token's log-prob is read from the raw logits scaled by the temperature (greedy: unscaled)."""
    import torch

    stop_ids = list(stop_ids if stop_ids is not None else stop_token_ids(tokenizer))
    device = next(model.parameters()).device
    ids, mask = left_pad(prompts, tokenizer.pad_token_id, device)
    model.eval()
    with torch.no_grad():
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=not greedy,
            temperature=None if greedy else temperature, top_p=None if greedy else top_p, top_k=None,
            eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id, output_logits=True, return_dict_in_generate=True)
    new_tokens = out.sequences[:, ids.shape[1]:]
    logits = torch.stack(out.logits, dim=1).float()  # raw logits, before any processor
    scale = 1.0 if greedy else temperature
    token_logprobs = torch.log_softmax(logits / scale, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
    generated = []
    for row in range(len(prompts)):
        completion, logprobs, finished = [], [], False
        for position, token in enumerate(new_tokens[row].tolist()):
            completion.append(token)
            logprobs.append(float(token_logprobs[row, position]))
            if token in stop_ids:
                finished = True
                break
        generated.append(Generated(completion, logprobs, tokenizer.decode(completion, skip_special_tokens=True), finished))
    return generated
