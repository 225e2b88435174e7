"""Every family trains and evaluates from the one CLI: `rubricgym train --env ID --steps 1
--eval-tasks 4` exits 0 and writes metrics.jsonl, and `rubricgym eval` reads its checkpoint, for
the RULER variant of every registered family (oracle judge), GRPO and PPO (the base ids: the
family contract's train_then_eval_held_out check). The generic layers
name no family: these ids work through the registry and the families' own training defaults."""

from __future__ import annotations

import json

import pytest

import rubricgym  # noqa: F401
from rubricgym.app.cli import main
from rubricgym.registration import held_out, scheme_of, training_kwargs
from rubricgym.testing.contract import family_ids, judged_variant

# every base id trains and evaluates in tests/test_family_contract.py (train_then_eval_held_out); here
# the RULER variant of every family in the registry does, with the oracle judge
JUDGED_IDS = [variant for variant in map(judged_variant, family_ids()) if variant is not None]
# small budgets and the tiny random model keep this plumbing in the fast tier (it checks that every id
# trains and evaluates, not what it learns); the closing note records the plain commands run as the issue writes them
SMALL = ["--group-size", "2", "--groups-per-step", "1", "--max-new-tokens", "12", "--report-to", "none",
         "--record-groups", "0"]


def run_and_eval(env_id: str, tmp_path, model: str, *extra: str) -> list[dict]:
    out = tmp_path / "run"
    assert main(["train", "--env", env_id, "--steps", "1", "--eval-tasks", "4", "--output-dir", str(out),
                 "--model", model, *SMALL, *extra]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval_accuracy" in r] == [0, 1]  # before and after, held out
    assert any("reward" in r for r in rows)
    assert main(["eval", "--env", env_id, "--checkpoint", str(out / "checkpoint-1"), "--tasks", "4",
                 "--max-new-tokens", "12"]) == 0
    return rows


@pytest.mark.parametrize("env_id", JUDGED_IDS)
def test_train_and_eval_a_judged_variant_of_every_family(env_id, tmp_path, shared_data, tiny_model_path):
    rows = run_and_eval(env_id, tmp_path, tiny_model_path, "--judge", "oracle:1.0")
    assert [r["judge_failed_groups"] for r in rows if "judge_failed_groups" in r] == [0.0]


def test_ppo_on_a_judged_id(tmp_path, tiny_model_path):
    run_and_eval("WordSortRuler-v0", tmp_path, tiny_model_path, "--algo", "ppo", "--judge", "oracle:1.0")


def test_family_knobs_are_checked_before_the_model_loads(capsys):
    from rubricgym.agents.train import Trainer, TrainConfig

    # the family's own message, before any model work (the Trainer raises before loading a policy)
    with pytest.raises(TypeError, match="unknown keyword 'levels'; RagSupportConfig has"):
        Trainer(TrainConfig(env="RagSupport-v0", env_kwargs={"levels": [1]}))
    with pytest.raises(ValueError, match="split must be one of"):
        Trainer(TrainConfig(env="WordSort-v0", env_kwargs={"split": "dev"}))


def test_families_declare_training_and_held_out_defaults():
    assert training_kwargs("Math-v0", {}) == {"levels": (1,)}
    assert training_kwargs("RagSupportRuler-v0", {"judge": "oracle:1.0"}) == {"split": "train", "judge": "oracle:1.0"}
    # held out: the base id, the family's held-out tasks, no scheme knobs
    assert held_out("MathRuler-v0", {"judge": "x", "combine": "sum"}) == ("Math-v0", {"levels": (1,), "split": "test"})
    assert held_out("Math-v0", {"dataset": "gsm8k"}) == ("Math-v0", {"levels": (1,), "dataset": "gsm8k"})
    assert held_out("FunctionCallRuler-v0", {"judge": "x"}) == ("FunctionCall-v0", {"split": "test"})
    assert held_out("WordSortRubric-v0", {"verifier": "x", "history_size": 3}) == ("WordSort-v0", {"split": "test"})


def test_function_call_split_holds_rows_out(shared_data):
    import gymnasium as gym

    train = gym.make("FunctionCall-v0", split="train").unwrapped.tasks
    test = gym.make("FunctionCall-v0", split="test").unwrapped.tasks
    every = gym.make("FunctionCall-v0").unwrapped.tasks
    assert len(train) + len(test) == len(every) and not {r["id"] for r in train} & {r["id"] for r in test}


def test_every_family_has_a_ruler_variant_and_schemes_come_from_the_registry():
    # JudgeGroup-v0 trains judges: its reward is agreement with a recorded gold order, and a judge
    # scoring a judge's scores would be circular, so it registers no scheme variants on purpose
    families = [info.id for info in rubricgym.ENVS.values() if info.base is None and info.id != "JudgeGroup-v0"]
    assert len(families) >= 5 and not [info.id for info in rubricgym.ENVS.values() if info.base == "JudgeGroup-v0"]
    for base in families:
        ruler = base.replace("-v0", "Ruler-v0")
        assert scheme_of(ruler).name == "ruler", ruler
    assert scheme_of("MathRubric-v0").judge_knob == "verifier" and scheme_of("MathFunction-v0").judge_knob is None
