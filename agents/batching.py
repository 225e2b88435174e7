"""Micro-batches of samples for the update passes: how many tokens a pass reads, and where to cut
a batch so each pass stays under a row and token budget (GRPO, PPO and SFT use them)."""

from __future__ import annotations

from typing import Sequence

import torch

from rubricgym.sampling import common_prefix_length

from .policy import MIN_SHARED_TOKENS, Sample


def pass_tokens(samples: Sequence[Sample], shared_prefix: bool = True) -> int:
    """Tokens one :meth:`Policy.score_samples` pass reads for ``samples``: the prefix they share
    once, and each row's padded rest (``shared_prefix=False``: every row whole, as a pass over
    :meth:`Policy.batch_tensors` reads them).

    Examples:
        >>> rows = [Sample([1] * 20 + [3], [5], [], "", False), Sample([1] * 20 + [9, 9], [6, 7], [], "", False)]
        >>> pass_tokens(rows[:1]), pass_tokens(rows)    # shared 19 + 2 rows x the longer rest (5)
        (22, 29)
        >>> pass_tokens(rows, shared_prefix=False)    # 2 rows x the longer row (24)
        48
    """
    common = common_prefix_length([s.prompt_ids for s in samples]) if shared_prefix else 0
    return _pass_tokens(len(samples), common, max(len(s.prompt_ids) + len(s.completion_ids) for s in samples))


def _pass_tokens(rows: int, common_prompt: int, longest: int) -> int:
    """:func:`pass_tokens` from a run's size, its prompts' common prefix (0: nothing shared) and its longest row."""
    shared = common_prompt - 1 if rows > 1 else 0
    shared = shared if shared >= MIN_SHARED_TOKENS else 0  # as score_samples decides
    return shared + rows * (longest - shared)


def micro_batches(samples: Sequence[Sample], max_rows: int, max_tokens: int = 0, shared_prefix: bool = True) -> list[range]:
    """Consecutive runs of ``samples``, one forward / backward pass each: at most ``max_rows``
    rows and, with ``max_tokens``, at most that many tokens read (:func:`pass_tokens`), so long
    multi-turn transcripts go a few rows at a time instead of exhausting memory (activations grow
    with rows x length, attention with rows x length squared). A row over the budget alone gets
    a pass of its own. ``shared_prefix=False`` counts every row whole (passes that do not share a
    common prompt, PPO's).

    Examples:
        >>> rows = [Sample([7] * n, [1], [], "", False) for n in (3, 3, 10, 3)]
        >>> micro_batches(rows, max_rows=8), micro_batches(rows, max_rows=8, max_tokens=12)
        ([range(0, 4)], [range(0, 2), range(2, 3), range(3, 4)])
    """
    runs, start = [], 0
    while start < len(samples):
        first = samples[start]
        common = len(first.prompt_ids) if shared_prefix else 0
        stop, longest = start + 1, len(first.prompt_ids) + len(first.completion_ids)
        while stop < len(samples) and stop - start < max_rows:
            # the run's common prefix and longest row, kept as it grows (no re-reading of the whole run)
            row = samples[stop]
            grown_common = min(common, common_prefix_length([first.prompt_ids, row.prompt_ids])) if common else 0
            grown_longest = max(longest, len(row.prompt_ids) + len(row.completion_ids))
            if max_tokens and _pass_tokens(stop + 1 - start, grown_common, grown_longest) > max_tokens:
                break
            stop, common, longest = stop + 1, grown_common, grown_longest
        runs.append(range(start, stop))
        start = stop
    return runs


def completion_logprobs(samples: Sequence[Sample], logprobs: torch.Tensor) -> list[list[float]]:
    """Each sample's completion log-probs out of a right-aligned batch tensor (as plain floats)."""
    width = logprobs.shape[1]
    return [logprobs[row, width - len(s.completion_ids):].detach().float().tolist() for row, s in enumerate(samples)]
