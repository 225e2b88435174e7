"""``RagSupport-v0``: answer a customer's question from retrieved knowledge-base articles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from rubricgym.chatenv import ChatEnv, Score, check_choice, ChatEnvConfig, scripted_sft_rows, split_tasks, TrainingDefaults, knob_range
from rubricgym.tools import ParsedAction, Tool, ToolError, format_tool_call

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
class RagSupportConfig(ChatEnvConfig):
    """Every knob of :class:`RagSupportEnv`."""

    dataset: str | SupportDataset = "builtin"
    """``builtin`` (Lumen Books), ``covid_faq``, ``xquad_en``, ``mtrag_un`` or a .json path."""
    mode: str = "context"
    """``context``: the top-k articles come with the question (one turn); ``agentic``: a search tool."""
    retriever: Any = "bm25"
    """``bm25``, ``dense`` (MiniLM, offline when installed), ``hybrid`` (both, rank-fused) or a Retriever."""
    top_k: int = field(default=3, metadata=knob_range(1, 100))
    """Articles retrieved per question (context mode) or per search (agentic mode)."""
    max_turns: int = field(default=4, metadata=knob_range(1, 1_000))
    """Agentic mode: turn limit, the answer included."""
    weights: dict[str, float] = field(default_factory=lambda: {"f1": 0.4, "citation": 0.2, "refusal": 0.2, "grounded": 0.2})
    """The env's reward = weighted sum of the components (all four always reported)."""
    max_action_chars: int = field(default=50_000, metadata=knob_range(1, 10_000_000))
    split: str = "all"
    """``all``, or ``train`` / ``test``: every fifth question is held out for ``test``."""


class RagSupportEnv(ChatEnv):

    """Customer support from a knowledge base (Lumen Books, covid_faq, xquad_en, mtrag_un): F1 + citation + refusal + grounding.

    One customer question per episode; the reward is a weighted sum of independent components;
    ``mode="context"`` gives the retrieved articles, ``mode="agentic"`` a search tool.

    Examples:
        >>> env = gym.make("RagSupport-v0")                                        # doctest: +SKIP
        >>> obs, info = env.reset(options={"task_id": "Q001"})                     # doctest: +SKIP
        >>> env.step("Unread printed books can be returned within 30 days [REF-01].")  # doctest: +SKIP
    """

    # answers with citations need more tokens than a boxed number (48 cut most short of F1 0.5)
    training = TrainingDefaults(env_kwargs={"split": "train"}, held_out={"split": "test"}, group_size=4, groups_per_step=2,
                                max_new_tokens=128, reward_name="components", bench=True)

    config_class = RagSupportConfig

    def setup(self) -> list[RagTask]:
        cfg = self.config
        check_choice("mode", cfg.mode, ("context", "agentic"))
        unknown = set(cfg.weights) - {"f1", "citation", "refusal", "grounded"}
        if unknown:
            raise ValueError(f"unknown reward components in weights: {sorted(unknown)}")
        self.dataset = load_support_dataset(cfg.dataset)
        if cfg.split != "all":
            keep = split_tasks(self.dataset.tasks, cfg.split)
            self.dataset = SupportDataset(self.dataset.name, self.dataset.articles, keep, self.dataset.company,
                                          self.dataset.contact)
        self.retriever: Retriever = make_retriever(cfg.retriever, self.dataset.articles)
        self.known_ids = [a.id for a in self.dataset.articles]
        self.search_tool = Tool("search", "Search the knowledge base; returns the best-matching articles.", SearchArgs,
                                self._search_text)
        self.tools = {"search": self.search_tool} if cfg.mode == "agentic" else {}
        prompt = SYSTEM_PROMPT.format(company=self.dataset.company, contact=self.dataset.contact,
                                      example=self.known_ids[0] if self.known_ids else "ID")
        if cfg.mode == "agentic":
            prompt += AGENTIC_PROMPT.format(max_turns=self.turn_limit())
        self.system_prompt = prompt
        self.retrieved: dict[str, Article] = {}
        return list(self.dataset.tasks)

    def turn_limit(self) -> int:
        """``max_turns`` in agentic mode; the context mode is single-turn."""
        return self.config.max_turns if self.config.mode == "agentic" else 1

    def _search_text(self, args: SearchArgs) -> str:
        results = self.retriever.search(args.query, self.config.top_k)
        if not results:
            raise ToolError("no article matches that query; try other words")
        for article, _ in results:
            self.retrieved[article.id] = article
        return "\n\n".join(article.render() for article, _ in results)

    def first_messages(self, task: RagTask, options: dict[str, Any]) -> list[dict[str, Any]]:
        self.retrieved = {}
        history = [dict(m) for m in task.history if m.get("content")]
        user = task.question
        if self.config.mode == "context":
            articles = [a for a, _ in self.retriever.search(task.question, self.config.top_k)]
            self.retrieved = {a.id: a for a in articles}
            rendered = "\n\n".join(a.render() for a in articles) or "(no article matched)"
            user = f"{task.question}\n\n[Retrieved articles]:\n{rendered}"
        return [{"role": "system", "content": self.system_prompt}, *history, {"role": "user", "content": user}]

    @classmethod
    def scripted_sft_rows(cls, policy: str = "reference", episodes: int = 64, seed: int = 0,
                          env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """SFT rows for a warm start (``--warm-start scripted:reference``) from the ``reference``
        agent's solved *train* episodes: in agentic mode it searches with the customer's question,
        then gives the task's reference answer with the supporting articles cited in brackets (a
        refusal, uncited, when the knowledge base does not answer). One row per turn; held-out
        tasks never appear.

        Examples:
            >>> rows = RagSupportEnv.scripted_sft_rows(episodes=2, env_kwargs={"mode": "agentic"})
            >>> [len(rows), rows[0]["completion"].startswith('<tool_call>{"name": "search"')]
            [4, True]
        """
        if policy != "reference":
            raise ValueError(f"unknown scripted policy {policy!r} for RagSupport-v0; choose from reference")

        def reference(messages: list, env: "RagSupportEnv") -> str:
            task = env.task
            if env.tools and not any(m["role"] == "tool" for m in messages):
                return format_tool_call("search", {"query": task.question})
            cited = cited_ids(task.answer, env.known_ids)
            missing = [i for i in task.supporting_ids if i not in cited]
            return task.answer + (" [" + ", ".join(missing) + "]" if task.answerable and missing else "")

        return scripted_sft_rows(cls(**{**(env_kwargs or {}), "split": "train"}), reference, episodes, seed, every_task=True)

    def task_info(self) -> dict[str, Any]:
        task = self.task
        # the reference answer and gold article ids stay out of info (an agent fed info would copy
        # them); the final step's episode result carries the reference for judges
        return {"question": task.question, "retrieved_ids": list(self.retrieved)}

    def reference(self) -> str | None:
        return self.task.answer

    def components(self, answer: str | None) -> tuple[dict[str, float], list[str]]:
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

    def partial_credit(self, final: ParsedAction | None, score: Score) -> dict[str, float]:
        """Support's parts of a task: ``citation`` (cited the passage that answers it), ``refusal``
        (refused exactly when it should) and, in agentic mode, ``valid_calls`` (the share of search
        calls that ran without an error)."""
        parts = {"citation": score.components["citation"], "refusal": score.components["refusal"]}
        if self.config.mode == "agentic":
            parts["valid_calls"] = self.valid_call_rate()
        return parts

    def score(self, final: ParsedAction | None) -> Score:
        answer = None if final is None else final.content
        components, missing = self.components(answer)
        reward = sum(self.config.weights.get(name, 0.0) * value for name, value in components.items())
        correct = bool(components["refusal"] == 1.0 and (components["f1"] >= 0.5 or not self.task.answerable))
        info: dict[str, Any] = {"unsupported_facts": missing, "cited_ids": sorted(cited_ids(answer or "", self.known_ids)),
                                "refused": bool(answer is not None and is_refusal(answer))}
        if answer is not None and not self.retrieved:
            info["warning"] = "answered before any search: every stated fact is unsupported"
        return Score(reward=reward, components=components, correct=correct, info=info)
