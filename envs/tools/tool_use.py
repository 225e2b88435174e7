"""``ToolUse-v0``: a multi-turn customer-service sandbox on a real SQLite database."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from typing import Any

from rubricgym.chatenv import ChatEnv, Score, check_choice, ChatEnvConfig, scripted_sft_rows, TrainingDefaults, knob_range
from rubricgym.tools import ParsedAction, ToolError, format_tool_call

from .shop import KINDS, TABLES, REFUND_WINDOW_DAYS, Shop, ShopTask, create_database, make_task, populate, shop_tools, table_state

SYSTEM_PROMPT = f"""You are a customer-service agent of Trailhead Outfitters, an outdoor-gear shop. Use the tools to look \
up customers and orders and to change them. Shop rules: only pending orders can be cancelled or get a new shipping \
address; refunds are for delivered orders within {REFUND_WINDOW_DAYS} days of delivery and never above what was paid; \
exchanges are for delivered orders within the same window, for an in-stock product of the same category that costs no \
more. Never break a rule to please a customer; escalate to a human when the customer asks for one or when a request \
cannot be met and they asked to be passed on. To call a tool, write \
<tool_call>{{"name": "<tool>", "arguments": {{...}}}}</tool_call>. When you are done, reply to the customer without \
calling a tool; that ends the conversation.
Tools:
"""


@dataclass
class ToolUseConfig(ChatEnvConfig):
    """Every knob of :class:`ToolUseEnv`."""

    num_tasks: int = field(default=70, metadata=knob_range(1, 100_000))
    """Tasks per split (kinds cycle: cancel, refund, address, exchange, expired refund, escalation, two requests)."""
    split: str = "train"
    """``train`` or ``test``: disjoint database seeds."""
    max_turns: int = field(default=10, metadata=knob_range(1, 1_000))
    max_action_chars: int = field(default=100_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error."""
    outcome_weight: float = 0.8
    """Reward = outcome_weight * (end state == goal) + progress_weight * progress."""
    progress_weight: float = 0.2


class ToolUseEnv(ChatEnv):
    """Multi-turn customer service on a fresh SQLite database (9 tools with business rules): goal end state + progress.

    One customer request per episode, on a fresh SQLite file seeded for the task.

    Reward components: ``outcome`` (1 when every table the task touches equals the goal state)
    and ``progress`` (share of the needed row changes made, minus wrong changes, floored at 0).
    An invalid call gets an error observation and costs a turn.
    """

    # a turn is one tool call or the reply to the customer
    training = TrainingDefaults(held_out={"split": "test"}, group_size=4, groups_per_step=2, max_new_tokens=96)

    config_class = ToolUseConfig

    def setup(self) -> list[ShopTask]:
        cfg = self.config
        check_choice("split", cfg.split, ("train", "test"))
        self.tools = shop_tools(lambda: self.shop)
        self.system_prompt = SYSTEM_PROMPT + "\n".join(json.dumps(tool.schema) for tool in self.tools.values())
        self.db: sqlite3.Connection | None = None
        self.shop: Shop | None = None
        self._workdir: str | None = None  # made at the first reset: a refused config or an unused env leaves no folder
        return [make_task(i, cfg.split) for i in range(cfg.num_tasks)]

    def _folder(self) -> str:
        if self._workdir is None:
            self._workdir = tempfile.mkdtemp(prefix="rubricgym-tooluse-")
        return self._workdir

    def first_messages(self, task: ShopTask, options: dict[str, Any]) -> list[dict[str, Any]]:
        self._close_db()
        path = os.path.join(self._folder(), "shop.sqlite")
        if os.path.exists(path):  # a fresh database every episode
            os.remove(path)
        create_database(path, task.seed)
        # a server steps an env from its executor's threads, one call at a time: the connection may move between them
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.shop = Shop(self.db)
        self._initial = {t: table_state(self.db, t) for t in task.tables}
        self._untouched = {t: table_state(self.db, t) for t in TABLES if t not in task.tables}
        self._goal = self.goal_state(task)
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task.instruction}]

    @staticmethod
    def goal_state(task: ShopTask) -> dict[str, list[tuple]]:
        """The touched tables after the task's correct calls, applied to a copy of its database."""
        db = sqlite3.connect(":memory:")
        populate(db, task.seed)
        shop = Shop(db)
        for name, arguments in task.solution:
            getattr(shop, name)(**arguments)
        return {t: table_state(db, t) for t in task.tables}

    @classmethod
    def scripted_sft_rows(cls, policy: str = "reference", episodes: int = 64, seed: int = 0,
                          env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """SFT rows for a warm start (``--warm-start scripted:reference``) from the ``reference``
        agent's solved *train* episodes: it looks up what the request does not say (the customer's
        id by email before an escalation, the order's items before an exchange), makes the task's
        correct calls, then answers the customer. One row per turn; held-out tasks never appear.
        """
        if policy != "reference":
            raise ValueError(f"unknown scripted policy {policy!r} for ToolUse-v0; choose from reference")
        return scripted_sft_rows(cls(**{**(env_kwargs or {}), "split": "train"}), _reference_turn, episodes, seed,
                                 every_task=True)

    @classmethod
    def scripted_agents(cls) -> dict[str, Any]:
        """``expert`` (the reference agent: solves every task), ``partly_right`` (the lookups and
        every correct call but the last, then a closing message) and ``harmful`` (changes what the
        customer did not ask for: cancels the order, or moves its address when cancelling was asked)."""
        return {"expert": _reference_turn, "partly_right": _partly_right_turn, "harmful": _harmful_turn}

    def task_info(self) -> dict[str, Any]:
        return {"instruction": self.task.instruction, "kind": self.task.kind, "params": dict(self.task.params)}

    def after_tool_call(self) -> None:
        self.db.commit()

    def components(self) -> dict[str, float]:
        needed = wrong = achieved = 0
        for table in self.task.tables:
            initial, goal, final = set(self._initial[table]), set(self._goal[table]), set(table_state(self.db, table))
            need, made = initial ^ goal, initial ^ final
            needed += len(need)
            achieved += len(need & made)
            wrong += len(made - need)
        outcome = float(all(table_state(self.db, t) == self._goal[t] for t in self.task.tables))
        progress = 1.0 if outcome else max(0.0, achieved - wrong) / max(needed, 1)
        return {"outcome": outcome, "progress": progress}

    def partial_credit(self, final: ParsedAction | None, score: Score) -> dict[str, float]:
        """The shop's parts of a task: ``valid_calls`` (the share of tool calls that ran without an
        error), ``right_tables`` (1 when the task's tables changed where they should and nothing else
        did), ``right_rows`` (the share of the needed row changes made) and ``no_forbidden`` (1 when
        no row changed that the task does not change). Their mean orders the end states: solved 1,
        partly solved between, nothing done and harm done 0.25 (a valid harmful call: its valid
        call; nothing: no harm)."""
        needed = achieved = wrong = 0
        for table in self.task.tables:
            initial, goal, final_rows = set(self._initial[table]), set(self._goal[table]), set(table_state(self.db, table))
            need, made = initial ^ goal, initial ^ final_rows
            needed, achieved, wrong = needed + len(need), achieved + len(need & made), wrong + len(made - need)
        touched_elsewhere = any(table_state(self.db, t) != self._untouched[t] for t in TABLES if t not in self.task.tables)
        no_forbidden = wrong == 0 and not touched_elsewhere
        return {"valid_calls": self.valid_call_rate(), "right_tables": float(achieved > 0 and no_forbidden),
                "right_rows": achieved / max(needed, 1), "no_forbidden": float(no_forbidden)}

    def score(self, final: ParsedAction | None) -> Score:
        components = self.components()
        reward = self.config.outcome_weight * components["outcome"] + self.config.progress_weight * components["progress"]
        return Score(reward=reward, components=components, correct=components["outcome"] == 1.0)

    def _close_db(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def close(self) -> None:
        """Closes the database and removes its folder; ``reset()`` makes new ones."""
        self._close_db()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        super().close()

    def __deepcopy__(self, memo: dict[int, Any]) -> "ToolUseEnv":
        """An independent env: the same config and episode, on its own copy of the database (closing
        one leaves the other working)."""
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        own = {"db", "shop", "tools", "_workdir"}  # what points at this env's database
        twin.__dict__.update({key: copy.deepcopy(value, memo) for key, value in self.__dict__.items() if key not in own})
        twin.tools = shop_tools(lambda: twin.shop)
        twin.db = twin.shop = twin._workdir = None
        if self.db is not None:
            self.db.commit()
            twin.db = sqlite3.connect(os.path.join(twin._folder(), "shop.sqlite"), check_same_thread=False)
            self.db.backup(twin.db)
            twin.shop = Shop(twin.db)
        return twin


__all__ = ["KINDS", "ToolUseConfig", "ToolUseEnv"]


# -- a candidate-action set for classic RL agents (rubricgym.wrappers.sb3.CandidateActions) --

def _call(name: str, **arguments: Any) -> str:
    return format_tool_call(name, arguments)


def tooluse_candidates(env: Any, messages: list, info: dict) -> list[str]:
    """Six calls from the task's state, in a fixed order: cancel, change address, refund the first
    item, exchange it for the cheapest allowed product, escalate, and reply (finish). The state is
    read through the shop's own read-only tools (what an agent could look up), never its tables."""
    shop = env.unwrapped.shop
    text = info.get("instruction") or next(m["content"] for m in messages if m["role"] == "user")
    orders = [int(o) for o in re.findall(r"order (\d+)", text)] or [0]
    email = re.search(r"\(([^)]+@[^)]+)\)", text)
    try:
        customer_id = shop.find_customer(email.group(1))["id"] if email else 0
    except ToolError:
        customer_id = 0
    order = orders[0]
    try:
        items = shop.get_order(order)["items"]
    except ToolError:
        items = []
    address = re.search(r"to ([^,]+), ([^,]+), ([^.?]+)[.?]", text)
    line, city, country = address.groups() if address else ("1 Main Street", "Lyon", "France")
    calls = [_call("cancel_order", order_id=order), _call("update_address", order_id=order, line=line, city=city, country=country)]
    if items:
        item = items[0]
        calls.append(_call("issue_refund", order_id=order, amount=round(item["quantity"] * item["unit_price"], 2),
                           reason="customer request"))
        swaps = sorted((p["price"], p["id"]) for p in shop.search_products(item["category"])
                       if p["category"] == item["category"] and p["id"] != item["product_id"]
                       and p["price"] <= item["unit_price"] and p["stock"] >= item["quantity"])
        calls.append(_call("exchange_item", order_id=order, product_id=item["product_id"],
                           new_product_id=swaps[0][1] if swaps else item["product_id"]))
    else:
        calls += [_call("issue_refund", order_id=order, amount=1.0, reason="customer request"),
                  _call("exchange_item", order_id=order, product_id=0, new_product_id=0)]
    calls.append(_call("escalate", customer_id=customer_id, order_id=order, reason="customer request"))
    calls.append("Thank you, your request is handled.")
    return calls


def _partly_right_turn(messages: list[dict[str, Any]], env: "ToolUseEnv") -> str:
    """The reference agent's plan without its last call (for a one-call task: a lookup only)."""
    order = next((arguments["order_id"] for _, arguments in env.task.solution if "order_id" in arguments), None)
    calls = [_call(name, **arguments) for name, arguments in env.task.solution[:-1]]
    plan = (calls or ([_call("get_order", order_id=order)] if order is not None else [])) + ["I have looked into it. Done."]
    made = sum(1 for m in messages if m.get("role") == "assistant")
    return plan[min(made, len(plan) - 1)]


def _harmful_turn(messages: list[dict[str, Any]], env: "ToolUseEnv") -> str:
    """A valid call that changes what was not asked for, then a confident closing message."""
    order = next((arguments["order_id"] for _, arguments in env.task.solution if "order_id" in arguments), None)
    cancels = any(name == "cancel_order" for name, _ in env.task.solution)
    harm = (_call("update_address", order_id=order, line="1 Wrong Street", city="Lyon", country="France") if cancels
            else _call("cancel_order", order_id=order)) if order is not None else "Done."
    plan = [harm, "All sorted, thank you."]
    made = sum(1 for m in messages if m.get("role") == "assistant")
    return plan[min(made, len(plan) - 1)]


def _reference_turn(messages: list[dict[str, Any]], env: "ToolUseEnv") -> str:
    """The scripted reference agent's next reply: the lookups the request needs, then the task's
    correct calls in order, then a closing message (it counts its own earlier calls)."""
    plan: list[str] = []
    email = re.search(r"\(([^()\s]+@[^()\s]+)\)", env.task.instruction)
    for name, arguments in env.task.solution:
        if "customer_id" in arguments and email:
            plan.append(_call("find_customer", email=email.group(1)))
        if "new_product_id" in arguments:
            plan.append(_call("get_order", order_id=arguments["order_id"]))
        plan.append(_call(name, **arguments))
    plan.append("It is done. Thank you for your patience.")
    made = sum(1 for m in messages if m.get("role") == "assistant")
    return plan[min(made, len(plan) - 1)]
