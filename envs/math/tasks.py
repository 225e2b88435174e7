"""Math tasks: a seeded procedural generator (the built-in default) and dataset adapters.

Generator levels (answers exact by construction):

==  ===============================================  ===========================
 1  single-digit addition                            ``What is 3 + 5?``
 2  single-digit arithmetic (+, -, *)                ``What is 7 * 6?``
 3  two-digit addition and subtraction               ``What is 47 - 18?``
 4  multi-step arithmetic with parentheses           ``What is (12 + 7) * 3 - 4?``
 5  multi-step word problems                         shopping, sharing, rates
 6  small linear equations (integer solution)        ``Solve for x: 3x + 4 = 19.``
==  ===============================================  ===========================

Task ``i`` of a level and split is drawn from ``random.Random(f"{level}:{split}:{i}")``, so the
same id is the same problem on every machine. ``train`` and ``test`` use disjoint seeds (at
level 1 there are only 100 distinct sums, so the two splits share problems by necessity).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from rubricgym.data import load_records

from .grader import last_boxed

#: the public math sets ``dataset=`` names: (file under a data folder, Hugging Face id, split)
PUBLIC_DATASETS: dict[str, tuple[str, str, str]] = {
    "gsm8k": ("gsm8k/gsm8k_test.jsonl", "openai/gsm8k", "test"),
    "gsm8k_train": ("gsm8k/gsm8k_train.jsonl", "openai/gsm8k", "train"),
    "math500": ("math500/math500.jsonl", "HuggingFaceH4/MATH-500", "test"),
    "aime2024": ("aime2024/aime2024.jsonl", "Maxwell-Jia/AIME_2024", "train"),
    "aime_1983_2023": ("aime_1983_2023/aime_1983_2023.jsonl", "di-zhang-fdu/AIME_1983_2024", "train"),
    "math_train": ("math_train/math_train.jsonl", "EleutherAI/hendrycks_math", "train"),
    "deepmath_5k": ("deepmath_5k/deepmath_5k.jsonl", "zwhe99/DeepMath-103K", "train"),
    "dapo": ("", "BytedTsinghua-SIA/DAPO-Math-17k", "train"),
}

_RAW = "https://raw.githubusercontent.com"
_GSM8K = f"{_RAW}/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data"
_RLLM = f"{_RAW}/agentica-project/rllm/874daa4acb7f451dc2a4b2b6e8ce28f5aa88d1f5/rllm/data/train/math"

#: what ``rubricgym data fetch NAME`` downloads: the upstream file at the commit ../shared/data
#: was built from (see its README), and the repository's licence
UPSTREAM: dict[str, tuple[str, str]] = {
    "gsm8k": (f"{_GSM8K}/test.jsonl", "MIT (openai/grade-school-math)"),
    "gsm8k_train": (f"{_GSM8K}/train.jsonl", "MIT (openai/grade-school-math)"),
    "math500": (f"{_RAW}/hkust-nlp/simpleRL-reason/cf1c7858bfc145a27aa733e75d930d34f0d318a6/examples/simplelr_math_eval/"
                "data/math500/test.jsonl", "MIT (hkust-nlp/simpleRL-reason; MATH itself is MIT)"),
    "aime2024": (f"{_RAW}/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/evaluation/data/aime24/test.jsonl",
                 "MIT (QwenLM/Qwen2.5-Math evaluation/); problem statements (c) MAA"),
    "aime_1983_2023": (f"{_RLLM}/aime.json", "MIT (agentica-project/rllm); problem statements (c) MAA"),
    "math_train": (f"{_RLLM}/math.json", "MIT (agentica-project/rllm; MATH itself is MIT)"),
    "deepmath_5k": (f"{_RAW}/alibaba/ROLL/8eb27cc2dc34c4d1310b169d9b86d339004d811a/data/math_deepmath_deal.jsonl",
                    "Apache-2.0 (alibaba/ROLL); upstream DeepMath-103K's licence not checked"),
}


#: rows a whole download of each upstream file converts to, at least (the count of ../shared/data's
#: copy, built from the same commit): fewer is a cut download
UPSTREAM_ROWS: dict[str, int] = {"gsm8k": 1319, "gsm8k_train": 7473, "math500": 500, "aime2024": 30,
                                 "aime_1983_2023": 975, "math_train": 7472, "deepmath_5k": 4994}


def rows_from_upstream(name: str, contents: list[bytes]) -> list[dict[str, Any]]:
    """An upstream math file (JSONL or a JSON list, any column layout the loader knows) as rows
    with the shared fields: ``id``, ``problem``, ``answer`` (a string, integers without leading
    zeros), ``source`` and the upstream extras (``solution``, ``subject``, ``level``, ``year``)."""
    from rubricgym.data import read_jsonl_or_json

    rows = []
    for task in tasks_from_records(read_jsonl_or_json(contents[0]), name):
        answer = task.answer.lstrip("0") or "0" if re.fullmatch(r"0\d+", task.answer) else task.answer
        rows.append({"id": task.id, "problem": task.problem, "answer": answer, "source": name, **task.metadata})
    return rows


@dataclass(frozen=True)
class MathTask:
    """One problem with its reference answer."""

    id: str
    problem: str
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


LEVELS = {
    1: "single-digit addition",
    2: "single-digit arithmetic",
    3: "two-digit addition and subtraction",
    4: "multi-step arithmetic",
    5: "word problems",
    6: "linear equations",
}

_NAMES = ["Ada", "Bo", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jamal", "Kai", "Lena"]
_ITEMS = ["apples", "pencils", "stickers", "marbles", "cookies", "books", "stamps", "shells"]


def _level1(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    return f"What is {a} + {b}?", a + b


def _level2(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    op = rng.choice("+-*")
    return f"What is {a} {op} {b}?", {"+": a + b, "-": a - b, "*": a * b}[op]


def _level3(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    if rng.random() < 0.5:
        return f"What is {a} + {b}?", a + b
    return f"What is {a} - {b}?", a - b


def _level4(rng: random.Random) -> tuple[str, int]:
    a, b, c, d = (rng.randint(2, 20) for _ in range(4))
    form = rng.randrange(3)
    if form == 0:
        return f"What is ({a} + {b}) * {c} - {d}?", (a + b) * c - d
    if form == 1:
        return f"What is {a} * {b} - {c} * {d}?", a * b - c * d
    return f"What is ({a} - {b}) * ({c} + {d})?", (a - b) * (c + d)


def _level5(rng: random.Random) -> tuple[str, int]:
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    form = rng.randrange(3)
    if form == 0:
        start, bags, per_bag, given = rng.randint(5, 30), rng.randint(2, 6), rng.randint(2, 9), rng.randint(1, 10)
        text = (f"{name} has {start} {item}. {name} buys {bags} bags with {per_bag} {item} in each bag, "
                f"then gives {given} {item} to a friend. How many {item} does {name} have now?")
        return text, start + bags * per_bag - given
    if form == 1:
        friends, each, extra = rng.randint(2, 8), rng.randint(2, 12), rng.randint(0, 5)
        total = friends * each + extra
        text = (f"{name} shares {total} {item} equally among {friends} friends and keeps the {extra} left over. "
                f"How many {item} does each friend get?")
        return text, each
    price, count, paid = rng.randint(2, 15), rng.randint(2, 9), 0
    paid = (price * count // 10 + 1) * 10 + rng.choice([0, 10, 20])
    text = (f"A notebook costs {price} dollars. {name} buys {count} notebooks and pays with {paid} dollars. "
            f"How much change, in dollars, does {name} get?")
    return text, paid - price * count


def _level6(rng: random.Random) -> tuple[str, int]:
    x, a, b = rng.randint(-12, 12), rng.randint(2, 9), rng.randint(-20, 20)
    c = a * x + b
    sign = "+" if b >= 0 else "-"
    return f"Solve for x: {a}x {sign} {abs(b)} = {c}.", x


_GENERATORS = {1: _level1, 2: _level2, 3: _level3, 4: _level4, 5: _level5, 6: _level6}


def generate_task(level: int, index: int, split: str = "train") -> MathTask:
    """The ``index``-th generated task of ``level`` in ``split`` (deterministic).

    Examples:
        >>> task = generate_task(1, 0)
        >>> task.id, task.problem == generate_task(1, 0).problem
        ('gen-L1-train-0', True)
    """
    if level not in _GENERATORS:
        raise ValueError(f"levels: each level must be one of {sorted(_GENERATORS)}, got {level!r}")
    rng = random.Random(f"{level}:{split}:{index}")
    problem, answer = _GENERATORS[level](rng)
    return MathTask(f"gen-L{level}-{split}-{index}", problem, str(answer), {"level": level, "source": "generated"})


def generated_tasks(levels: Iterable[int] = (1, 2, 3, 4, 5, 6), num_tasks: int = 500, split: str = "train") -> list[MathTask]:
    """``num_tasks`` generated tasks per level, levels interleaved."""
    levels = list(levels)
    return [generate_task(level, i, split) for i in range(num_tasks) for level in levels]


def parse_task_id(task_id: str) -> MathTask | None:
    """Rebuild a generated task from its id (``gen-L<level>-<split>-<index>``), else None."""
    match = re.fullmatch(r"gen-L(\d+)-(\w+)-(\d+)", task_id)
    if not match:
        return None
    return generate_task(int(match.group(1)), int(match.group(3)), match.group(2))


# ---------------------------------------------------------------------------------------------
# Dataset adapters: map the common column layouts onto MathTask.

def _problem_of(record: dict[str, Any]) -> str | None:
    for key in ("problem", "question", "Problem", "Question", "prompt", "query"):
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value:  # DAPO-Math-17k: prompt is a chat message list
            users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
            if users and isinstance(users[-1], str):
                return users[-1]
    return None


def _answer_of(record: dict[str, Any]) -> str | None:
    reward_model = record.get("reward_model")
    if isinstance(reward_model, dict) and reward_model.get("ground_truth") is not None:
        return str(reward_model["ground_truth"])  # DAPO-Math-17k / verl layout
    for key in ("answer", "Answer", "final_answer", "ground_truth", "target", "expected_answer"):
        value = record.get(key)
        if value is not None and str(value).strip():
            text = str(value)
            if "####" in text:  # GSM8K as published on the hub: rationale then '#### 18'
                text = text.split("####")[-1].strip().replace(",", "")
            return text.strip()
    solution = record.get("solution")
    if isinstance(solution, str):
        return last_boxed(solution)
    return None


def tasks_from_records(records: list[dict[str, Any]], name: str) -> list[MathTask]:
    """Turn raw records into MathTasks; rows without a problem or an answer are an error."""
    tasks = []
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ValueError(f"dataset {name} row {index}: a record is a dict (problem, answer ...), "
                             f"got {type(record).__name__} {record!r:.40}")
        problem, answer = _problem_of(record), _answer_of(record)
        if problem is None or answer is None:
            raise ValueError(
                f"dataset {name} row {index}: need a problem (problem/question/prompt) and an answer "
                f"(answer/reward_model.ground_truth/solution with \\boxed); got columns {sorted(record)}"
            )
        extra = record.get("extra_info") if isinstance(record.get("extra_info"), dict) else {}
        task_id = record.get("id") or record.get("unique_id") or extra.get("index") or f"{name}-{index}"
        metadata = {k: record[k] for k in ("source", "subject", "level", "answer_type", "difficulty", "year", "solution")
                    if k in record}
        tasks.append(MathTask(str(task_id), problem, answer, metadata))
    return tasks


def load_tasks(dataset: str | list[dict[str, Any]], *, levels: Iterable[int] = (1, 2, 3, 4, 5, 6),
               num_tasks: int = 500, split: str = "train") -> list[MathTask]:
    """Tasks for ``dataset``: ``"generated"``, a known name, a path, a hub id, or a list of dicts."""
    if isinstance(dataset, list):
        return tasks_from_records(dataset, "records")
    if dataset == "generated":
        return generated_tasks(levels, num_tasks, split)
    return tasks_from_records(load_records(dataset), str(dataset))
