"""``WordSort-v0``: put a handful of words into alphabetical order (the worked example of a new
env family in one file; see "Adding an env family" in docs/design.md).

A family supplies only its tasks, its first messages and its scoring; :class:`ChatEnv` does the
rest, and :func:`register` derives ``WordSortRuler-v0`` and ``WordSortRubric-v0`` from it. The
one other line it needs is its entry point in pyproject.toml.

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> env = gym.make("WordSort-v0")
    >>> obs, info = env.reset(options={"task_id": "ws-train-0"})
    >>> obs[-1]["content"]
    'Sort these words alphabetically: nectar, birch, ivory, quartz, pearl, maple'
    >>> env.step("birch, ivory, maple, nectar, pearl, quartz")[1]
    1.0
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from rubricgym.chatenv import ChatEnv, Score, TrainingDefaults, check_choice, ChatEnvConfig, knob_range
from rubricgym.registration import register_family
from rubricgym.tools import ParsedAction

WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "ivory", "jade", "kelp", "lemon",
         "maple", "nectar", "olive", "pearl", "quartz", "raven", "stone", "thyme", "umber", "violet", "willow", "yarrow")
SYSTEM_PROMPT = "You sort words. Reply with the given words in alphabetical order, separated by commas, and nothing else."


@dataclass
class WordSortConfig(ChatEnvConfig):
    """Every knob of :class:`WordSortEnv`."""

    num_tasks: int = field(default=200, metadata=knob_range(1, 100_000))
    """Tasks per split."""
    min_words: int = field(default=3, metadata=knob_range(1, len(WORDS)))
    max_words: int = field(default=6, metadata=knob_range(1, len(WORDS)))
    """Each task draws between ``min_words`` and ``max_words`` distinct words (at most the word list's size)."""
    split: str = "train"
    """``train`` or ``test`` (disjoint seeds)."""
    max_action_chars: int = field(default=2_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error."""


@dataclass(frozen=True)
class WordSortTask:
    id: str
    words: tuple[str, ...]


class WordSortEnv(ChatEnv):
    """Sort 3-6 words alphabetically: +1 for the exact order, else -1; ``position`` = share of words in place."""

    training = TrainingDefaults(held_out={"split": "test"})  # train on the train split, measure on the test one

    config_class = WordSortConfig

    def setup(self) -> list[WordSortTask]:
        cfg = self.config
        check_choice("split", cfg.split, ("train", "test"))
        if cfg.min_words > cfg.max_words:
            raise ValueError(f"min_words ({cfg.min_words}) must not exceed max_words ({cfg.max_words})")
        seed = 0 if cfg.split == "train" else 1_000_003
        return [self.make_task(f"ws-{cfg.split}-{i}", random.Random(seed + i)) for i in range(cfg.num_tasks)]

    def make_task(self, task_id: str, rng: random.Random) -> WordSortTask:
        return WordSortTask(task_id, tuple(rng.sample(WORDS, rng.randint(self.config.min_words, self.config.max_words))))

    def first_messages(self, task: WordSortTask, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": "Sort these words alphabetically: " + ", ".join(task.words)}]

    def reference(self) -> str:
        return ", ".join(sorted(self.task.words))

    def score(self, final: ParsedAction | None) -> Score:
        expected = sorted(self.task.words)
        # the task's words in the order the reply gives them (other words are ignored)
        given = [w for w in re.findall(r"[a-z]+", (final.content if final else "").lower()) if w in self.task.words]
        correct = given == expected
        in_place = sum(a == b for a, b in zip(given, expected)) / len(expected)
        return Score(reward=1.0 if correct else -1.0, components={"outcome": 1.0 if correct else -1.0, "position": in_place},
                     correct=correct)


def register() -> None:
    """``WordSort-v0`` and its judged variants (RULER summed with the outcome; RLCER rubrics)."""
    register_family("WordSort", WordSortEnv, ruler={"combine": "sum"}, rubric={})
