"""TRL's environment_factory classes (#24): every family's tools as typed methods whose calls are
env steps, answer / get_reward, BFCL's per-row tool sets, the group reward of judged ids, and a
real GRPOTrainer for 2 steps on Math + calculator and ToolUse, in-process and through `rubricgym serve`."""

from __future__ import annotations

import inspect
import math
import os
import sys

import gymnasium as gym
import pytest

from conftest import require

require("trl", "trl")
require("openenv", "openenv")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from transformers.utils import get_json_schema  # noqa: E402

from judges import gold, scripted_judge  # noqa: E402
from rubricgym.integrations.trl_environments import (EnvironmentGroupReward, environment_class,  # noqa: E402
                                                     environment_dataset, environment_factories, with_tool_template)
from rubricgym.testing.loopback import free_port, server_process  # noqa: E402

MATH = {"levels": [1], "tools": ["calculator"]}


def tools_of(cls) -> list[str]:
    return sorted(name for name, _ in inspect.getmembers(cls, inspect.isfunction)
                  if not name.startswith("_") and name not in ("reset", "get_reward"))


@pytest.mark.parametrize("env_id,kwargs", [("Math-v0", MATH), ("RagSupport-v0", {"mode": "agentic"}), ("ToolUse-v0", {}),
                                           ("WordSort-v0", {}), ("JudgeGroup-v0", {})])
def test_every_family_has_its_tools_as_typed_methods(env_id, kwargs):
    cls = environment_class(env_id, **kwargs)
    env = gym.make(env_id, **kwargs).unwrapped
    env.reset(seed=0)
    assert tools_of(cls) == sorted(["answer", *(s["function"]["name"] for s in env.tool_schemas)])
    instance = cls()
    for name in tools_of(cls):  # transformers reads every method into the schema the chat template shows
        schema = get_json_schema(getattr(instance, name))["function"]
        if name != "answer":
            expected = next(s["function"] for s in env.tool_schemas if s["function"]["name"] == name)
            assert schema["description"] == expected["description"]
            assert set(schema["parameters"]["properties"]) == set(expected["parameters"]["properties"])


def test_tool_calls_are_env_steps_and_the_reward_is_the_envs():
    cls = environment_class("Math-v0", **MATH)
    row = environment_dataset("Math-v0", 1, **MATH)[0]
    env = cls()
    assert env.reset(**row) is None  # the prompt is the row's own
    assert env.calculator(expression="6*7") == "42" and env.calculator(expression="import os").startswith("Error")
    answer = gold(row["task_id"])
    assert env.answer(answer=f"\\boxed{{{answer}}}") == "Answer recorded." and env.get_reward() == 1.0
    assert env.calculator(expression="1+1").startswith("The episode has ended")
    env.reset(**row)
    assert env.get_reward() == -1.0  # never answered: the env's score for no answer
    local = gym.make("Math-v0", **MATH)
    local.reset(options={"task_id": row["task_id"]})
    assert env.trajectory[:2] == local.unwrapped.messages[:2]


def test_bfcl_rows_get_their_own_tool_sets_and_calls_are_the_answer(shared_data):
    dataset = environment_dataset("FunctionCall-v0", 6, dataset="simple_python")
    factories, routed = environment_factories("FunctionCall-v0", dataset, dataset="simple_python")
    assert len(factories) >= 2 and set(routed["environment"]) == set(factories)
    row = routed[0]
    cls = factories[row["environment"]]
    env = gym.make("FunctionCall-v0", dataset="simple_python").unwrapped
    env.reset(options={"task_id": row["task_id"]})
    function = env.tool_schemas[0]["function"]
    assert tools_of(cls) == sorted(["answer", *(s["function"]["name"].replace(".", "_") for s in env.tool_schemas)])
    instance = cls()
    instance.reset(**{k: v for k, v in row.items() if k != "environment"})
    arguments = {name: 1 for name in function["parameters"].get("required", [])}
    assert "recorded" in getattr(instance, function["name"].replace(".", "_"))(**arguments)
    reward = instance.get_reward()  # the recorded calls, submitted as the answer
    _, expected, *_ = env.step({"role": "assistant", "content": "",
                                "tool_calls": [{"function": {"name": function["name"], "arguments": arguments}}]})
    assert reward == expected


def test_a_judged_id_is_scored_by_groups():
    judge, backend = scripted_judge()
    cls = environment_class("MathRuler-v0", **MATH)
    assert "get_reward" not in dict(inspect.getmembers(cls))  # its reward is the group's
    reward = EnvironmentGroupReward("MathRuler-v0", num_generations=2, judge=judge)
    row = environment_dataset("Math-v0", 1, **MATH)[0]  # the same tasks as MathRuler-v0
    envs = [cls(), cls(), environment_class("Math-v0", **MATH)(), environment_class("Math-v0", **MATH)()]
    for env in envs:
        env.reset(**row)
    envs[0].answer(answer=f"\\boxed{{{gold(row['task_id'])}}} quality=0.9")
    envs[1].answer(answer="\\boxed{0} quality=0.2")
    rewards = reward([row["prompt"]] * 4, ["", "", "", ""], environments=envs)
    assert rewards[:2] == pytest.approx([1.0 + 0.9, -1.0 + 0.2]) and rewards[2:] == [None, None]  # combine=sum
    assert len(backend.requests) == 1 and reward.groups_scored == 1  # one call for the group, others not its own


def train_two_steps(tmp_path, factories: dict, rows: dict, model: str):
    """A real GRPOTrainer, 2 steps, a dict environment_factory (one prompt of each environment a step)."""
    import trl
    from datasets import concatenate_datasets
    from peft import LoraConfig

    from rubricgym.models import load_model_and_tokenizer

    dataset = concatenate_datasets([rows[name].add_column("environment", [name]) for name in factories])
    model, tokenizer = load_model_and_tokenizer(model)
    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2 * len(factories), num_generations=2,
                          max_completion_length=12, max_steps=2, learning_rate=1e-4, logging_steps=1, report_to="none",
                          use_cpu=True, bf16=False, save_strategy="no", seed=0, max_tool_calling_iterations=1)
    trainer = trl.GRPOTrainer(model=model, processing_class=with_tool_template(tokenizer), train_dataset=dataset,
                              environment_factory=factories, args=args,
                              peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    trainer.train()
    steps = [row for row in trainer.state.log_history if "loss" in row]
    assert len(steps) == 2 and all(math.isfinite(row["loss"]) for row in steps)
    pools = dict(trainer._environment_pool)
    assert all(len(pools[name]) == 2 for name in factories)  # two rollouts of each environment, each its own instance
    assert all(instance.episode is not None for name in factories for instance in pools[name])  # every episode scored
    return steps, pools


@pytest.mark.slow  # two `rubricgym serve` processes and TRL's generation over the shop's 1,600-token prompts: ~80 s
def test_grpo_trainer_with_environment_factory_in_process_and_served(tmp_path, tiny_model_path):
    """Math + calculator in-process and through `rubricgym serve` in one trainer; the shop (ToolUse,
    nine tools) through `rubricgym serve` in another (its 1,600-token prompt would pad every math
    prompt of a shared batch to its length). The shop in-process is the same class on a local env
    (the tests above play its tools); the closing note of #24 records its own 2-step run. The tiny
    model plays (the default tokenizer and template): this is plumbing, not learning."""
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    serve = [sys.executable, "-m", "rubricgym", "serve"]
    with server_process([*serve, "Math-v0", "--env-kwargs", '{"levels": [1], "tools": ["calculator"]}', "--port", str(ports[0])],
                        urls[0] + "/health"), \
            server_process([*serve, "ToolUse-v0", "--port", str(ports[1])], urls[1] + "/health"):
        steps, pools = train_two_steps(
            tmp_path / "math", {"math": environment_class("Math-v0", **MATH), "math_served": environment_class("Math-v0", url=urls[0], **MATH)},
            {"math": environment_dataset("Math-v0", 1, **MATH), "math_served": environment_dataset("Math-v0", 1, seed=1, **MATH)},
            tiny_model_path)
        assert all("rewards/MathTools/mean" in row for row in steps)  # get_reward of every rollout reached TRL
        assert pools["math_served"][0]._env.unwrapped.url == urls[0]
        steps, pools = train_two_steps(tmp_path / "shop", {"shop_served": environment_class("ToolUse-v0", url=urls[1])},
                                       {"shop_served": environment_dataset("ToolUse-v0", 1)}, tiny_model_path)
        assert all("rewards/ToolUseTools/mean" in row for row in steps)
        served = pools["shop_served"][0]
        assert served._env.unwrapped.url == urls[1] and served.trajectory[0]["role"] == "system"
