"""ToolUse-v0: every task solvable by the test's own calls, a no-op scores 0, rules enforced."""

import json
import re

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401

from judges import reply_scores, scripted_judge


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def solve(env, info):
    """The test's own solver: reads the request, looks things up through the tools, acts."""
    text = info["instruction"]
    email = re.search(r"\(([^)]+@[^)]+)\)", text).group(1)
    obs, *_ = env.step(call("find_customer", email=email))
    customer = json.loads(obs[-1]["content"])
    orders = [int(o) for o in re.findall(r"order (\d+)", text)]
    kind = info["kind"]
    if kind in ("cancel", "cancel_and_address"):
        env.step(call("cancel_order", order_id=orders[0]))
        if kind == "cancel_and_address":  # the second order has shipped: the change must be refused
            obs, *_ = env.step(call("update_address", order_id=orders[1], line="5 Mill Street", city="Cork", country="Ireland"))
            assert obs[-1]["content"].startswith("Error:")
    elif kind == "address":
        line, city, country = re.search(r"to ([^,]+), ([^,]+), ([^.]+)\.", text).groups()
        env.step(call("update_address", order_id=orders[0], line=line, city=city, country=country))
    elif kind == "refund":
        amount = float(re.search(r"\(([\d.]+) euros\)", text).group(1))
        env.step(call("issue_refund", order_id=orders[0], amount=amount, reason="damaged on arrival"))
    elif kind == "exchange":
        obs, *_ = env.step(call("get_order", order_id=orders[0]))
        order = json.loads(obs[-1]["content"])
        old_name, new_name = re.search(r"exchange the (.+?) in order \d+ for the (.+)\.", text).groups()
        old = next(i for i in order["items"] if i["name"] == old_name)
        obs, *_ = env.step(call("search_products", query=new_name))
        new = json.loads(obs[-1]["content"])[0]
        env.step(call("exchange_item", order_id=orders[0], product_id=old["product_id"], new_product_id=new["id"]))
    elif kind == "refund_expired":
        obs, *_ = env.step(call("issue_refund", order_id=orders[0], amount=1.0, reason="customer request"))
        assert "refund window" in obs[-1]["content"]
        env.step(call("escalate", customer_id=customer["id"], order_id=orders[0], reason="refund outside the window"))
    elif kind == "escalate":
        env.step(call("escalate", customer_id=customer["id"], order_id=orders[0], reason="wants a person"))
    return env.step("All done, thank you for your patience.")


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_task_is_solvable_and_noop_scores_zero(split):
    env = gym.make("ToolUse-v0", split=split)
    tasks = env.unwrapped.tasks
    assert len(tasks) >= 60 and len({t.kind for t in tasks}) == 7
    for task in tasks:
        _, info = env.reset(options={"task_id": task.id})
        _, reward, terminated, _, info = solve(env, info)
        assert terminated and reward == 1.0, (task.id, task.kind, info["reward_components"])
        env.reset(options={"task_id": task.id})
        _, reward, terminated, _, info = env.step("Sorry, I can't help with that.")
        assert reward == 0.0 and info["reward_components"] == {"outcome": 0.0, "progress": 0.0}, task.id
    env.close()


def test_wrong_actions_lose_reward_and_rules_are_enforced():
    env = gym.make("ToolUse-v0")
    task = next(t for t in env.unwrapped.tasks if t.kind == "refund")
    _, info = env.reset(options={"task_id": task.id})
    order = info["params"]["order_id"]
    obs, *_ = env.step(call("issue_refund", order_id=order, amount=99999, reason="x"))
    assert "must be between 0" in obs[-1]["content"]
    obs, *_ = env.step(call("cancel_order", order_id=order))
    assert "only pending orders" in obs[-1]["content"]
    obs, *_ = env.step(call("issue_refund", order_id=order, amount=1.0, reason="x"))  # a wrong amount
    _, reward, _, _, info = env.step("Done.")
    assert info["reward_components"]["outcome"] == 0.0 and reward == 0.0


@pytest.mark.parametrize("action, fragment", [
    (call("cancel_order"), "order_id: Field required"),
    (call("cancel_order", order_id="abc"), "order_id: Input should be a valid integer"),
    (call("teleport", x=1), "unknown tool 'teleport'"),
    ("<tool_call>{not json}</tool_call>", "not valid JSON"),
    (call("find_customer", email="nobody@x.example"), "no customer with email"),
])
def test_invalid_calls_cost_a_turn_with_a_clear_error(action, fragment):
    env = gym.make("ToolUse-v0", max_turns=3)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and fragment in info["error"] and info["turn"] == 1


def test_turn_limit_truncates_and_scores_the_end_state():
    env = gym.make("ToolUse-v0", max_turns=2)
    task = next(t for t in env.unwrapped.tasks if t.kind == "cancel")
    env.reset(options={"task_id": task.id})
    env.step(call("cancel_order", order_id=task.params["order_id"]))
    _, reward, terminated, truncated, info = env.step(call("get_order", order_id=task.params["order_id"]))
    assert truncated and not terminated and reward == 1.0


def test_check_env_and_group_env_and_ruler():
    check_env(gym.make("ToolUse-v0").unwrapped)
    judge, backend = scripted_judge(lambda m, i: reply_scores(m, scorer=lambda body: 0.5))
    check_env(gym.make("ToolUseRuler-v0", judge=judge).unwrapped)
    envs = gym.make_vec("ToolUseRuler-v0", num_envs=2, group_size=2, judge=judge)
    _, info = envs.reset(seed=0)
    _, rewards, terminated, _, info = envs.step(["Done.", "Done."])
    assert terminated.all() and list(rewards) == pytest.approx([0.125, 0.125])
    assert "<agent_tools>" in backend.requests[-1][1]["content"] and "issue_refund" in backend.requests[-1][1]["content"]


def test_database_is_a_real_sqlite_file():
    import sqlite3

    env = gym.make("ToolUse-v0")
    env.reset(seed=3)
    path = env.unwrapped.db.execute("PRAGMA database_list").fetchone()[2]
    assert path.endswith("shop.sqlite")
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 8
    other.close()


def test_the_reference_agent_solves_every_train_task_and_never_shows_a_test_task():
    """``--warm-start scripted:reference``: lookups the request needs, the correct calls, a reply."""
    from rubricgym.envs.tools.tool_use import ToolUseEnv

    rows = ToolUseEnv.scripted_sft_rows("reference", episodes=70)
    closing = [r for r in rows if "<tool_call>" not in r["completion"]]
    assert len(closing) == 70  # every train episode solved (only solved episodes give rows)
    test_requests = {t.instruction for t in ToolUseEnv(split="test").tasks}
    assert not {r["messages"][1]["content"] for r in rows} & test_requests
    escalations = [r for r in rows if '"escalate"' in r["completion"]]
    assert escalations and all(r["messages"][-1]["role"] == "tool" and "customer" in r["messages"][-2]["content"]
                               for r in escalations)  # the id came from find_customer, not from nowhere
    with pytest.raises(ValueError, match="unknown scripted policy"):
        ToolUseEnv.scripted_sft_rows("oracle", episodes=1)
