"""LLMBar (Zeng et al., 2024): instruction-following pairs with a gold label, for measuring judges.

Each row: ``input`` (an instruction), ``output_1``, ``output_2``, ``label`` (1 or 2: the output
that follows the instruction). Read from a data folder (``llmbar/<subset>.json``: ../shared/data,
or ``rubricgym data fetch llmbar_<subset>``).
"""

from __future__ import annotations

from typing import Any

from rubricgym.data import KNOWN_DATASETS, load_records, register_dataset

_UPSTREAM = "https://raw.githubusercontent.com/princeton-nlp/LLMBar/900616b/Dataset/LLMBar"
#: subset -> path under the upstream Dataset/LLMBar folder
SUBSETS = {"natural": "Natural", "adversarial_neighbor": "Adversarial/Neighbor",
           "adversarial_gptinst": "Adversarial/GPTInst"}


def register() -> None:
    """Name the three LLMBar sets ``llmbar_<subset>`` for :func:`rubricgym.data.load_records`."""
    for subset, upstream in SUBSETS.items():
        if f"llmbar_{subset}" not in KNOWN_DATASETS:
            register_dataset(f"llmbar_{subset}", f"llmbar/{subset}.json", urls=(f"{_UPSTREAM}/{upstream}/dataset.json",),
                             licence="MIT (princeton-nlp/LLMBar)")


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
