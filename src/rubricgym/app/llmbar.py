"""LLMBar (Zeng et al., 2024): instruction-following pairs with a gold label, for measuring judges.

Each row: ``input`` (an instruction), ``output_1``, ``output_2``, ``label`` (1 or 2: the output
that follows the instruction). Read from a data folder (``llmbar/<subset>.json``: ../shared/data,
or ``rubricgym data fetch llmbar_<subset>``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rubricgym.data import KNOWN_DATASETS, load_records, register_dataset
from rubricgym.envs.judge import LLMBAR_SPECIFICATION, llmbar_trajectories

_UPSTREAM = "https://raw.githubusercontent.com/princeton-nlp/LLMBar/900616b/Dataset/LLMBar"
#: subset -> path under the upstream Dataset/LLMBar folder
SUBSETS = {"natural": "Natural", "adversarial_neighbor": "Adversarial/Neighbor",
           "adversarial_gptinst": "Adversarial/GPTInst"}
#: pairs in each upstream file (a download with fewer was cut)
SUBSET_ROWS = {"natural": 100, "adversarial_neighbor": 134, "adversarial_gptinst": 92}


def register() -> None:
    """Name the three LLMBar sets ``llmbar_<subset>`` for :func:`rubricgym.data.load_records`."""
    for subset, upstream in SUBSETS.items():
        if f"llmbar_{subset}" not in KNOWN_DATASETS:
            register_dataset(f"llmbar_{subset}", f"llmbar/{subset}.json", urls=(f"{_UPSTREAM}/{upstream}/dataset.json",),
                             licence="MIT (princeton-nlp/LLMBar)", rows=SUBSET_ROWS[subset])


def load_pairs(subset: str) -> list[dict[str, Any]]:
    """The rows of one LLMBar subset; a row without the four fields is a clear error."""
    if subset not in SUBSETS:
        raise ValueError(f"subset must be one of {list(SUBSETS)}, got {subset!r}")
    register()
    rows = load_records(f"llmbar_{subset}")
    for index, row in enumerate(rows):
        if not {"input", "output_1", "output_2", "label"} <= set(row) or row["label"] not in (1, 2):
            raise ValueError(f"llmbar {subset} row {index}: need input, output_1, output_2 and label 1 or 2")
    return rows


# -- pairwise judge accuracy ---------------------------------------------------------------------

SPECIFICATION = LLMBAR_SPECIFICATION
PUBLISHED_KEYS = {"natural": "Natural", "adversarial_neighbor": "Adversarial/Neighbor",
                  "adversarial_gptinst": "Adversarial/GPTInst"}


@dataclass
class PairVerdicts:
    """One judge on one subset: per pair, whether each presentation order ranked the gold output first."""

    judge: str
    subset: str
    correct: list[tuple[bool, bool]] = field(default_factory=list)
    ties: int = 0
    failures: int = 0
    seconds: float = 0.0
    tokens: int = 0

    @property
    def pairs(self) -> int:
        return len(self.correct)

    @property
    def accuracy(self) -> float:
        """LLMBar's ``correct_average``: accuracy averaged over the two presentation orders."""
        return float(np.mean([(a + b) / 2 for a, b in self.correct])) if self.correct else float("nan")

    @property
    def both_correct(self) -> float:
        """LLMBar's ``correct_both``: pairs judged right in both orders."""
        return float(np.mean([a and b for a, b in self.correct])) if self.correct else float("nan")

    def line(self) -> str:
        """One report line (``rubricgym judge-eval`` and benchmarks/judge_llmbar.py)."""
        low, high = self.interval()
        return (f"{self.judge:<16} {self.subset:<22} pairs={self.pairs:3d} acc={self.accuracy:.3f} [{low:.2f}, {high:.2f}] "
                f"both={self.both_correct:.3f} ties={self.ties} failed={self.failures} "
                f"s/pair={self.seconds / max(1, self.pairs):.2f}")

    def interval(self, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
        """95 % bootstrap interval of :attr:`accuracy`, resampling pairs."""
        from rubricgym.app.stats import mean_interval

        interval = mean_interval([(a + b) / 2 for a, b in self.correct], resamples, seed)
        return interval.low, interval.high


def pair_trajectories(row: dict[str, Any], gold_first: bool) -> tuple[list[list[dict[str, str]]], int]:
    """The pair as a RULER group of two (gold first or second) and the gold member's index."""
    return llmbar_trajectories(row, gold_first), 0 if gold_first else 1


def judge_pairs(judge: Any, subset: str, limit: int | None = None, api_base: str | None = None,
                config: Any = None, progress: bool = True, label: str | None = None) -> PairVerdicts:
    """Pairwise accuracy of ``judge`` (a LiteLLM model string, ``local``, ``oracle:<acc>`` or
    ``random``) on one LLMBar subset, both presentation orders; the RULER prompt on each pair as a
    group of two. A tie or a failed call counts as wrong (and is counted)."""
    import time

    from tqdm import tqdm

    from rubricgym.judges.oracle import OracleJudge, is_oracle
    from rubricgym.judges.ruler import RulerConfig, oracle_ruler_result, ruler_score_sync
    from rubricgym.llm import make_llm

    rows = load_pairs(subset)[:limit]
    verdicts = PairVerdicts(label or (judge if isinstance(judge, str) else str(getattr(judge, "name", judge))), subset)
    oracle = OracleJudge.parse(judge) if is_oracle(judge) else None
    llm = None if oracle or judge == "random" else make_llm(judge, api_base=api_base)
    config = config or RulerConfig()
    rng = np.random.default_rng(zlib.crc32(subset.encode()))  # the random judge: its own draws per subset
    for index, row in enumerate(tqdm(rows, desc=f"{judge} on {subset}", unit="pair", disable=not progress)):
        outcome = []
        for gold_first in (True, False):
            group, gold = pair_trajectories(row, gold_first)
            start = time.perf_counter()
            if oracle is not None:
                result = oracle_ruler_result(oracle, f"{subset}-{index}-{gold_first}", [k == gold for k in range(2)], config)
            elif judge == "random":
                scores = list(rng.random(2))
                result = None
            else:
                result = ruler_score_sync(group, llm, config)
            verdicts.seconds += time.perf_counter() - start
            if result is not None:
                verdicts.tokens += result.prompt_tokens + result.completion_tokens
                if result.failed:
                    verdicts.failures += 1
                    outcome.append(False)
                    continue
                scores = result.scores
            if scores[0] == scores[1]:
                verdicts.ties += 1
            outcome.append(bool(scores[gold] > scores[1 - gold]))
        verdicts.correct.append((outcome[0], outcome[1]))
    return verdicts


def published_rows(subset: str, path: Any = None) -> dict[str, dict[str, float]]:
    """The LLMBar paper's evaluator rows for ``subset`` (``llmbar/published_statistics.json``):
    ``{"GPT-4 (Vanilla)": {"accuracy": 0.955, "both_correct": 0.93}, ...}``."""
    from rubricgym.data import find_data_file

    path = path or find_data_file("llmbar/published_statistics.json")
    if path is None:
        return {}
    import json
    from pathlib import Path

    table = json.loads(Path(path).read_text()).get(PUBLISHED_KEYS[subset], {})
    rows = {}
    for model, prompts in table.items():
        for prompt, stats in prompts.items():
            both = stats["correct_both"].split("=")[-1]
            rows[f"{model} ({prompt})"] = {"accuracy": float(stats["correct_average"].rstrip("%")) / 100,
                                           "both_correct": float(both.strip().rstrip("%")) / 100}
    return rows
