"""Micro-batches (rubricgym.agents.batching): every pass as long as the row and token budget allows."""

from __future__ import annotations


from conftest import require

require("torch", "agents")
from rubricgym.agents.batching import micro_batches, pass_tokens  # noqa: E402
from rubricgym.agents.policy import Sample  # noqa: E402


def test_passes_are_the_longest_runs_the_budget_allows():
    import random

    rng = random.Random(0)
    for _ in range(500):  # groups sharing prompt prefixes of random lengths, rows of random lengths
        base = [rng.randrange(5) for _ in range(rng.randrange(60))]
        rows = [Sample(base[:rng.randrange(len(base) + 1)] + [rng.randrange(5) for _ in range(rng.randrange(1, 30))],
                       [1] * rng.randrange(1, 20), [], "", False) for _ in range(rng.randrange(1, 12))]
        max_rows, max_tokens, shared = rng.randrange(1, 10), rng.choice([30, 60, 120, 400]), rng.random() < 0.5
        runs = micro_batches(rows, max_rows, max_tokens, shared_prefix=shared)
        assert [i for run in runs for i in run] == list(range(len(rows)))  # every row once, in order
        for run in runs:
            assert len(run) <= max_rows
            assert len(run) == 1 or pass_tokens(rows[run.start:run.stop], shared_prefix=shared) <= max_tokens
            if run.stop < len(rows) and len(run) < max_rows:  # stopped early only where one more row breaks the budget
                assert pass_tokens(rows[run.start:run.stop + 1], shared_prefix=shared) > max_tokens
