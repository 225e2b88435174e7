"""Partial credit (the `partial` scheme) on hand-made end states: solved, partly solved, nothing
done and harm done, for the shop; the right citation and refusal for support."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401


def call(name: str, **arguments) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def play_shop(task_index: int, actions: list[str]) -> dict:
    env = gym.make("ToolUsePartial-v0")
    task = env.unwrapped.tasks[task_index]
    env.reset(options={"task_id": task.id})
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated or truncated
    parts = {k.removeprefix("partial_"): v for k, v in info["reward_components"].items() if k.startswith("partial_")}
    return {"reward": reward, "parts": parts, "env": info["reward_components"]["env"]}


def test_the_shop_orders_solved_partly_solved_nothing_and_harm():
    env = gym.make("ToolUse-v0").unwrapped
    cancel = next(i for i, t in enumerate(env.tasks) if t.kind == "cancel")
    order = env.tasks[cancel].solution[0][1]["order_id"]

    solved = play_shop(cancel, [call("cancel_order", order_id=order), "Your order is cancelled."])
    assert solved["parts"] == {"valid_calls": 1.0, "right_tables": 1.0, "right_rows": 1.0, "no_forbidden": 1.0}
    assert solved["reward"] == 1.0 and solved["env"] == 1.0

    nothing = play_shop(cancel, ["I cannot help with that."])
    assert nothing["parts"] == {"valid_calls": 0.0, "right_tables": 0.0, "right_rows": 0.0, "no_forbidden": 1.0}
    assert nothing["reward"] == 0.25

    # a valid call that changes what the customer did not ask for (the order's address, not its state)
    harm = play_shop(cancel, [call("update_address", order_id=order, line="1 Oak Lane", city="Lyon", country="France"),
                              "Done."])
    assert harm["parts"]["no_forbidden"] == 0.0 and harm["parts"]["right_rows"] == 0.0 and harm["parts"]["right_tables"] == 0.0
    assert harm["reward"] == 0.25 <= nothing["reward"] < solved["reward"]

    broken = play_shop(cancel, [call("cancel_order", order_id="not a number"), call("cancel_order", order_id=order), "Done."])
    assert broken["parts"]["valid_calls"] == 0.5 and broken["parts"]["right_rows"] == 1.0
    assert nothing["reward"] < broken["reward"] < solved["reward"]  # partly right: between


def test_support_gives_credit_for_the_right_citation_and_refusal(shared_data):
    env = gym.make("RagSupportPartial-v0")
    _, info = env.reset(seed=0)
    task = env.unwrapped.task
    cited = f"See [{task.supporting_ids[0]}]." if task.answerable else "I cannot answer that from our articles."
    _, reward, terminated, _, info = env.step(cited)
    parts = {k: v for k, v in info["reward_components"].items() if k.startswith("partial_")}
    assert terminated and set(parts) == {"partial_citation", "partial_refusal"}
    assert reward == pytest.approx(sum(parts.values()) / 2)
    assert parts["partial_refusal"] == 1.0


def test_a_family_without_partial_credit_has_no_partial_variant():
    assert "ToolUsePartial-v0" in rubricgym.ENVS and "MathPartial-v0" not in rubricgym.ENVS
