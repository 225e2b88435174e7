"""``RagSupport-v0``: answer a customer's question from retrieved knowledge-base articles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, Field

from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.tools import Tool, ToolError, execute_tool_calls, parse_action

from .kb import Article, RagTask, SupportDataset, load_support_dataset
from .retrieval import Retriever, make_retriever
from .rewards import citation_score, cited_ids, grounded_score, is_refusal, refusal_score, token_f1

SYSTEM_PROMPT = (
    "You are the customer support assistant of {company}. Answer the customer's question using ONLY the "
    "knowledge-base articles you are given. Cite the id of every article you use in square brackets, like [{example}]. "
    "If the articles do not contain the answer, say that the knowledge base does not cover it and suggest contacting "
    "{contact}; never guess or add facts that are not in the articles."
)
AGENTIC_PROMPT = (
    "\n\nSearch the knowledge base before answering: write\n"
    '<tool_call>{{"name": "search", "arguments": {{"query": "<what to look for>"}}}}</tool_call>\n'
    "and wait for the articles. You may search more than once; you have at most {max_turns} turns in total, "
    "the final answer included."
)
MAX_QUERY_CHARS = 1_000


class SearchArgs(BaseModel):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="Words to search the knowledge base for.")


@dataclass
class RagSupportConfig:
    """Every knob of :class:`RagSupportEnv`."""

    dataset: str | SupportDataset = "builtin"
    """``builtin`` (Lumen Books), ``covid_faq``, ``xquad_en``, ``mtrag_un`` or a .json path."""
    mode: str = "context"
    """``context``: the top-k articles come with the question (one turn); ``agentic``: a search tool."""
    retriever: Any = "bm25"
    """``bm25``, ``dense`` (MiniLM, offline when installed), ``hybrid`` (both, rank-fused) or a Retriever."""
    top_k: int = 3
    max_turns: int = 4
    """Agentic mode: turn limit, the answer included."""
    weights: dict[str, float] = field(default_factory=lambda: {"f1": 0.4, "citation": 0.2, "refusal": 0.2, "grounded": 0.2})
    """The env's reward = weighted sum of the components (all four always reported)."""
    max_action_chars: int = 50_000
    split: str = "all"
    """``all``, or ``train`` / ``test``: every fifth question is held out for ``test``."""


class RagSupportEnv(gym.Env):
    """One customer question per episode; the reward is a weighted sum of independent components.

    Example:
        >>> env = gym.make("RagSupport-v0")                                        # doctest: +SKIP
        >>> obs, info = env.reset(options={"task_id": "Q001"})                     # doctest: +SKIP
        >>> env.step("Unread printed books can be returned within 30 days [REF-01].")  # doctest: +SKIP
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, config: RagSupportConfig | None = None, render_mode: str | None = None, **kwargs: Any):
        if config is not None and kwargs:
            raise TypeError("pass either a RagSupportConfig or keyword arguments, not both")
        self.config = cfg = config or RagSupportConfig(**kwargs)
        if cfg.mode not in ("context", "agentic"):
            raise ValueError(f"mode must be 'context' or 'agentic', got {cfg.mode!r}")
        unknown = set(cfg.weights) - {"f1", "citation", "refusal", "grounded"}
        if unknown:
            raise ValueError(f"unknown reward components in weights: {sorted(unknown)}")
        self.render_mode = render_mode
        self.dataset = load_support_dataset(cfg.dataset)
        if cfg.split not in ("all", "train", "test"):
            raise ValueError(f"split must be 'all', 'train' or 'test', got {cfg.split!r}")
        if cfg.split != "all":
            keep = [t for i, t in enumerate(self.dataset.tasks) if (i % 5 == 0) == (cfg.split == "test")]
            self.dataset = SupportDataset(self.dataset.name, self.dataset.articles, keep, self.dataset.company,
                                          self.dataset.contact)
        self.tasks_by_id = {t.id: t for t in self.dataset.tasks}
        self.retriever: Retriever = make_retriever(cfg.retriever, self.dataset.articles)
        self.known_ids = [a.id for a in self.dataset.articles]
        self.search_tool = Tool("search", "Search the knowledge base; returns the best-matching articles.", SearchArgs,
                                self._search_text)
        self.tools = {"search": self.search_tool} if cfg.mode == "agentic" else {}
        self.max_turns = cfg.max_turns if cfg.mode == "agentic" else 1
        prompt = SYSTEM_PROMPT.format(company=self.dataset.company, contact=self.dataset.contact,
                                      example=self.known_ids[0] if self.known_ids else "ID")
        if cfg.mode == "agentic":
            prompt += AGENTIC_PROMPT.format(max_turns=self.max_turns)
        self.system_prompt = prompt
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=cfg.max_action_chars)
        self.task: RagTask | None = None
        self.messages: list[dict[str, Any]] = []
        self.retrieved: dict[str, Article] = {}
        self._turn, self._done = 0, True

    def _search_text(self, args: SearchArgs) -> str:
        results = self.retriever.search(args.query, self.config.top_k)
        if not results:
            raise ToolError("no article matches that query; try other words")
        for article, _ in results:
            self.retrieved[article.id] = article
        return "\n\n".join(article.render() for article, _ in results)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if options.get("task_id") is not None:
            if str(options["task_id"]) not in self.tasks_by_id:
                raise ValueError(f"unknown task_id {options['task_id']!r} for dataset {self.dataset.name!r}")
            self.task = self.tasks_by_id[str(options["task_id"])]
        else:
            self.task = self.dataset.tasks[int(self.np_random.integers(len(self.dataset.tasks)))]
        self.retrieved = {}
        history = [dict(m) for m in self.task.history if m.get("content")]
        user = self.task.question
        if self.config.mode == "context":
            articles = [a for a, _ in self.retriever.search(self.task.question, self.config.top_k)]
            self.retrieved = {a.id: a for a in articles}
            rendered = "\n\n".join(a.render() for a in articles) or "(no article matched)"
            user = f"{self.task.question}\n\n[Retrieved articles]:\n{rendered}"
        self.messages = [{"role": "system", "content": self.system_prompt}, *history, {"role": "user", "content": user}]
        self._turn, self._done = 0, False
        return list(self.messages), self._info()

    def _info(self, **extra: Any) -> dict[str, Any]:
        info = {"task_id": self.task.id, "system_prompt": self.system_prompt, "question": self.task.question,
                "answer": self.task.answer, "supporting_ids": list(self.task.supporting_ids),
                "answerable": self.task.answerable, "turn": self._turn, "retrieved_ids": list(self.retrieved)}
        if self.tools:
            info["tools"] = [self.search_tool.schema]
        info.update(extra)
        return info

    def step(self, action: Any):
        if self._done:
            return list(self.messages), 0.0, True, False, self._info(error="the episode has ended; call reset() before step()",
                                                                       reward_components={})
        self._turn += 1
        parsed = parse_action(action, max_chars=self.config.max_action_chars)
        if parsed.invalid:
            self.messages += [{"role": "assistant", "content": parsed.content}, {"role": "user", "content": f"Error: {parsed.invalid}"}]
            if self._turn < self.max_turns:
                return list(self.messages), 0.0, False, False, self._info(error=parsed.invalid, reward_components={})
            return self._finish(None, error=parsed.invalid, truncated=False)
        self.messages.append(parsed.assistant_message())
        if self.tools and parsed.wants_tools:
            results, errors = execute_tool_calls(parsed, self.tools)
            self.messages += results
            if self._turn >= self.max_turns:
                return self._finish(None, error="turn limit reached without a final answer", truncated=True)
            return list(self.messages), 0.0, False, False, self._info(reward_components={}, **({"error": "; ".join(errors)} if errors else {}))
        return self._finish(parsed.content, error=None, truncated=False)

    def score(self, answer: str | None) -> tuple[dict[str, float], list[str]]:
        """The components for ``answer`` given this episode's task and retrieved articles."""
        if answer is None:
            return {"f1": 0.0, "citation": 0.0, "refusal": 0.0, "grounded": 0.0}, []
        task = self.task
        grounded, missing = grounded_score(answer, [a.text for a in self.retrieved.values()])
        return {
            "f1": token_f1(answer, task.answer),
            "citation": citation_score(answer, task.supporting_ids, self.known_ids, task.answerable),
            "refusal": refusal_score(answer, task.answerable),
            "grounded": grounded,
        }, missing

    def _finish(self, answer: str | None, error: str | None, truncated: bool):
        self._done = True
        components, missing = self.score(answer)
        reward = sum(self.config.weights.get(name, 0.0) * value for name, value in components.items())
        extra: dict[str, Any] = {"reward_components": components, "unsupported_facts": missing,
                                 "cited_ids": sorted(cited_ids(answer or "", self.known_ids)),
                                 "refused": bool(answer is not None and is_refusal(answer)),
                                 "correct": bool(components["refusal"] == 1.0 and (components["f1"] >= 0.5 or not self.task.answerable))}
        if answer is not None and not self.retrieved:
            extra["warning"] = "answered before any search: every stated fact is unsupported"
        if error:
            extra["error"] = error
        return list(self.messages), float(reward), not truncated, truncated, self._info(**extra)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or m.get('tool_calls')}" for m in self.messages)
