"""The family contract, over the registry: every check of rubricgym.testing.contract on every
registered family (a family registered in one line gets them all), and a throwaway family defined
here, with no other file changed, passes every one of them."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

import rubricgym  # noqa: F401  (registers the families)
from rubricgym.chatenv import ChatEnv, ChatEnvConfig, Score, TrainingDefaults, split_tasks
from rubricgym.testing.contract import CHECKS, ContractRun, checks_for, family_ids, registered

CASES = [(env_id, check) for env_id in family_ids() for check in checks_for(env_id)]


@pytest.mark.parametrize("env_id,check", CASES, ids=[f"{e}-{c}" for e, c in CASES])
def test_every_registered_family_keeps_the_contract(env_id, check, tmp_path, shared_data, tiny_model_path):
    CHECKS[check](env_id, ContractRun(tmp_path, tiny_model_path))


def test_the_registry_has_the_families_and_every_check_applies():
    ids = family_ids()
    assert {"Math-v0", "RagSupport-v0", "ToolUse-v0", "WordSort-v0", "FunctionCall-v0", "JudgeGroup-v0"} <= set(ids)
    assert "OpenEnv-v0" not in ids  # a plain gym.Env: no family hooks
    assert all(len(checks_for(i)) == len(CHECKS) for i in ids if i != "JudgeGroup-v0")


@dataclass
class PalindromeConfig(ChatEnvConfig):
    split: str = "train"
    """``train`` or ``test``."""
    max_action_chars: int = 500


class PalindromeEnv(ChatEnv):
    """Is the word a palindrome? Answer yes or no: +1 when right, else 0."""

    config_class = PalindromeConfig
    training = TrainingDefaults(held_out={"split": "test"}, max_new_tokens=8)

    def setup(self):
        rng = random.Random(7)
        words = []
        for _ in range(40):
            half = "".join(rng.choice("abc") for _ in range(3))
            words.append(half + half[::-1] if rng.random() < 0.5 else half + "".join(rng.sample("abc", 3)))
        return split_tasks(words, "test" if self.config.split == "test" else "train")

    def task_id(self, task):
        return task

    def first_messages(self, task, options):
        return [{"role": "system", "content": "Answer yes or no."}, {"role": "user", "content": f"Is {task} a palindrome?"}]

    def reference(self):
        return "yes" if self.task == self.task[::-1] else "no"

    def score(self, final):
        correct = final is not None and final.content.strip().lower().startswith(self.reference())
        return Score(reward=float(correct), components={"outcome": float(correct)}, correct=correct)


def test_a_throwaway_family_passes_every_check(tmp_path, tiny_model_path):
    with registered("Palindrome", PalindromeEnv) as ids:  # the one line a family needs
        assert ids[0] == "Palindrome-v0" and "PalindromeRuler-v0" in ids and "Palindrome-v0" in family_ids()
        assert checks_for("Palindrome-v0") == list(CHECKS)
        for name in CHECKS:
            (tmp_path / name).mkdir()
            CHECKS[name]("Palindrome-v0", ContractRun(tmp_path / name, tiny_model_path))
    assert "Palindrome-v0" not in family_ids()


def test_a_broken_family_fails_the_checks(tmp_path, tiny_model_path):
    class Unseeded(PalindromeEnv):  # draws its system prompt from the global random module, not the env's seed
        def first_messages(self, task, options):
            return [{"role": "system", "content": f"Answer yes or no ({random.random():.6f})."},
                    {"role": "user", "content": f"Is {task} a palindrome?"}]

    with registered("Unseeded", Unseeded):
        with pytest.raises(AssertionError, match="played twice differs"):
            CHECKS["seeded_replay"]("Unseeded-v0", ContractRun(tmp_path, tiny_model_path))
