"""The base class of every rubricgym text env: one multi-turn chat loop, written once.

:class:`ChatEnv` owns what every family needs and nothing family-specific: reset by task id,
the step guard with an explicit ended flag, invalid actions, tool execution, the turn limit,
``info`` bookkeeping, ``render`` and the typed :class:`~rubricgym.records.EpisodeResult` of the
final step. A family supplies only its tasks, its first messages and its scoring; every hook the base reads
is declared on it with a default:

* ``config_class``: its knobs, a dataclass subclassing :class:`ChatEnvConfig` (``max_turns`` and
  ``max_action_chars`` come from there); the base builds ``self.config`` from the object or the
  keyword arguments given, checks the knobs' types, and sets the turn and action limits itself;
* :meth:`setup` (read ``self.config``, return the tasks; may set ``self.tools``) and
  :meth:`task_id` (the id of one task);
* :meth:`first_messages` (system prompt first, then the conversation the agent starts from);
* :meth:`score` (the components, reward and correctness of the final action);
* optionally :meth:`turn_limit`, :meth:`task_info` (extra reset ``info``), :meth:`reference`,
  :meth:`find_task`, :meth:`after_tool_call`, :meth:`held_out_kwargs`,
  :meth:`scripted_sft_rows`, :meth:`partial_credit` and ``execute_tools``;
* as a class attribute, its :class:`TrainingDefaults` (what ``rubricgym train / eval / bench``
  and the trainer adapters use unless told otherwise).

Every family shows ``reset(options={"hint": text})`` the same way: the text is appended to the
first user message (RLCER's rubric hints use it).

Semantics (one message per situation, shared by every env):

* an invalid action (wrong type, over ``max_action_chars``) is answered with ``Error: ...`` as a
  user message and ``info["error"]``; it costs a turn, and on the last turn ends the episode
  unanswered (the env's score for no answer);
* tool calls are executed when the env has tools; running out of turns while still calling
  tools is ``truncated`` with :data:`TURN_LIMIT` as the error;
* stepping an ended episode returns the final observation, reward 0, ``terminated=True``,
  ``info["episode_ended"] = True`` and :data:`ENDED` as the error; it never raises.

Examples:
    >>> class Echo(ChatEnv):
    ...     def setup(self): return ["hello", "world"]
    ...     def task_id(self, task): return task
    ...     def first_messages(self, task, options):
    ...         return [{"role": "system", "content": "Repeat the word."}, {"role": "user", "content": task}]
    ...     def score(self, final):
    ...         ok = final is not None and final.content.strip() == self.task
    ...         return Score(reward=float(ok), components={"match": float(ok)}, correct=ok)
    >>> env = Echo()
    >>> obs, info = env.reset(options={"task_id": "world"})
    >>> obs, reward, terminated, truncated, info = env.step("world")
    >>> reward, terminated, info["episode"].correct
    (1.0, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Sequence

import gymnasium as gym

from rubricgym.knobs import _is_integer, check_knobs, knob_range  # noqa: F401  (families import them from here)
from rubricgym.records import EpisodeResult
from rubricgym.spaces import AssistantReplySpace, ChatSpace
from rubricgym.tools import MAX_TOOL_CALLS, ParsedAction, Tool, execute_tool_calls, parse_action

ENDED = "the episode has ended; call reset() before step()"
TURN_LIMIT = "turn limit reached without a final answer"


def make_config(config_class: type, config: Any, kwargs: dict[str, Any]) -> Any:
    """An env's config: the object given, or one built from keyword arguments (not both); an
    unknown keyword names the knobs there are.

    Examples:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Knobs:
        ...     split: str = "train"
        >>> make_config(Knobs, None, {"group_size": 2})
        Traceback (most recent call last):
        ...
        TypeError: unknown keyword 'group_size' (the group vector env's knob: use gym.make_vec(id, num_envs=..., group_size=...) without vectorization_mode); Knobs has: split
    """
    if config is not None and kwargs:
        raise TypeError(f"pass either a {config_class.__name__} or keyword arguments, not both")
    if config is not None:
        if not isinstance(config, config_class):
            raise TypeError(f"config must be a {config_class.__name__}, got {type(config).__name__}")
        check_knobs(config_class, {f.name: getattr(config, f.name) for f in fields(config_class)})
        return config
    known = {f.name for f in fields(config_class)}
    for name in kwargs:
        if name not in known:
            hint = (" (the group vector env's knob: use gym.make_vec(id, num_envs=..., group_size=...) without "
                    "vectorization_mode)") if name == "group_size" else ""
            raise TypeError(f"unknown keyword {name!r}{hint}; {config_class.__name__} has: {', '.join(sorted(known))}")
    check_knobs(config_class, kwargs)  # before the family's own __post_init__ reads them
    return config_class(**kwargs)


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """Refuse a setting outside ``choices`` at construction, with the allowed values named."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


def split_tasks(tasks: Sequence[Any], split: str, every: int = 5) -> list[Any]:
    """The tasks of ``split``: ``all``, or ``test`` (every ``every``-th task, from the first) and
    ``train`` (the rest), for families whose data has no split of its own.

    Examples:
        >>> split_tasks(range(10), "test"), split_tasks(range(10), "train")[:3]
        ([0, 5], [1, 2, 3])
    """
    check_choice("split", split, ("all", "train", "test"))
    if split == "all":
        return list(tasks)
    return [t for i, t in enumerate(tasks) if (i % every == 0) == (split == "test")]


@dataclass(frozen=True)
class TrainingDefaults:
    """What a family trains and evaluates with unless a run says otherwise. Success (held-out
    accuracy) is always the family's :attr:`Score.correct`."""

    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The family's knobs for training runs (a run's own ``env_kwargs`` override them)."""
    held_out: dict[str, Any] = field(default_factory=dict)
    """Merged over a run's env kwargs for held-out evaluation (``{"split": "test"}``; empty: the
    family has no held-out tasks and evaluates on its training tasks)."""
    group_size: int = 8
    """Rollouts per task (the bench's budget for this family)."""
    groups_per_step: int = 4
    """Tasks per training step (the bench's budget)."""
    max_new_tokens: int = 48
    """Reply budget per turn (the bench's budget: answers that need more tokens say so here)."""
    reward_name: str = "env"
    """The name of the env's own reward in bench tables (the row every scheme is compared with)."""
    bench: bool = False
    """Whether ``rubricgym bench`` without ``--envs`` runs this family."""


@dataclass
class ChatEnvConfig:
    """The knobs every family has; a family's config subclasses it (and may change the defaults
    by declaring the field again)."""

    max_turns: int = field(default=1, metadata=knob_range(1, 1_000))
    """The turn limit (the final answer counts as a turn): tool calls, or another try after an
    invalid action, each take one; 1 = single-turn."""
    max_action_chars: int = field(default=200_000, metadata=knob_range(1, 10_000_000))
    """Longer replies are refused with an error; the action space's limit is the same number."""


@dataclass
class Score:
    """What a family's :meth:`ChatEnv.score` returns for the final action."""

    reward: float
    components: dict[str, float]
    correct: bool | None = None
    info: dict[str, Any] = field(default_factory=dict)
    """Extra ``info`` keys of the final step (also kept in the episode result's metadata)."""


class ChatEnv(gym.Env):
    """A chat env: observation = the messages so far, action = the assistant's reply."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    #: the family's knobs (a :class:`ChatEnvConfig` subclass); ``self.config`` is one of them
    config_class: ClassVar[type] = ChatEnvConfig
    #: whether tool calls in a reply are executed (False: the calls are the answer, as in BFCL)
    execute_tools: ClassVar[bool] = True
    #: tool time one reply's calls share; calls past it are answered with an error (k sandboxed
    #: python calls would otherwise take k times the sandbox's own limit)
    max_tool_seconds: ClassVar[float] = 10.0
    #: what runs train and evaluate with unless told otherwise
    training: ClassVar[TrainingDefaults] = TrainingDefaults()

    def __init__(self, config: Any = None, render_mode: str | None = None, **kwargs: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if not (isinstance(self.config_class, type) and issubclass(self.config_class, ChatEnvConfig)):
            raise TypeError(f"{type(self).__name__}.config_class must subclass ChatEnvConfig, got {self.config_class!r}")
        self.render_mode = render_mode
        self.config = make_config(self.config_class, config, kwargs)
        self.tools: dict[str, Tool] = {}
        self.tasks: list[Any] = list(self.setup())
        if not self.tasks:
            raise ValueError(f"{type(self).__name__} has no tasks")
        self.tasks_by_id = {str(self.task_id(task)): task for task in self.tasks}
        #: the turn limit of this env (the family's :meth:`turn_limit` of its config)
        self.max_turns: int = self.turn_limit()
        #: longer replies are refused; the action space's limit is the same number
        self.max_action_chars: int = self.config.max_action_chars
        if not (_is_integer(self.max_turns) and self.max_turns >= 1):
            raise ValueError(f"max_turns must be an integer >= 1, got {self.max_turns!r}")
        if not (_is_integer(self.max_action_chars) and self.max_action_chars >= 1):
            raise ValueError(f"max_action_chars must be an integer >= 1, got {self.max_action_chars!r}")
        self.observation_space = ChatSpace()
        self.action_space = AssistantReplySpace(max_length=self.max_action_chars)
        self.task: Any = None
        self.messages: list[dict[str, Any]] = []
        self._turn = 0
        self._ended = True
        #: this episode's tool calls, and those answered with an error
        self.tool_calls_made = self.tool_calls_failed = 0

    # -- what a family supplies ------------------------------------------------------------------

    def setup(self) -> Sequence[Any]:
        """Read ``self.config`` and return the tasks (called once, by ``__init__``); a family with
        tools sets ``self.tools`` here."""
        raise NotImplementedError(f"{type(self).__name__} must define setup() (return its tasks)")

    def turn_limit(self) -> int:
        """The turn limit of this env; ``config.max_turns`` unless the family says otherwise
        (Math without tools is single-turn whatever ``max_turns`` says)."""
        return self.config.max_turns

    def task_id(self, task: Any) -> str:
        """The id of ``task`` (``reset(options={"task_id": ...})`` picks it)."""
        return str(task.id)

    def find_task(self, task_id: str) -> Any:
        """The task with ``task_id``; raise ``ValueError`` for an unknown id (a programming error)."""
        task = self.tasks_by_id.get(str(task_id))
        if task is None:
            raise ValueError(f"unknown task_id {task_id!r} for {type(self).__name__}")
        return task

    def first_messages(self, task: Any, options: dict[str, Any]) -> list[dict[str, Any]]:
        """The conversation the agent starts from, system prompt first."""
        raise NotImplementedError

    def score(self, final: ParsedAction | None) -> Score:
        """Score the episode's final action (None: it ended without a valid final answer)."""
        raise NotImplementedError

    def task_info(self) -> dict[str, Any]:
        """Family-specific ``info`` keys of every step (the current task is ``self.task``)."""
        return {}

    def reference(self) -> str | None:
        """The reference answer of the current task, for the episode result (judges may read it)."""
        return None

    def after_tool_call(self) -> None:
        """Called after each executed tool call (e.g. to commit a database transaction)."""

    def partial_credit(self, final: ParsedAction | None, score: Score) -> dict[str, float]:
        """Parts of the task done, each in [0, 1], read from the family's own state at the episode's
        end (the ``partial`` scheme rewards their mean: a signal where pass / fail is flat); empty:
        the family defines none. ``self.tool_calls_made`` / ``self.tool_calls_failed`` count the
        episode's tool calls."""
        return {}

    def valid_call_rate(self) -> float:
        """The share of this episode's tool calls that ran without an error (0.0 when none was made:
        no call is no credit)."""
        return (self.tool_calls_made - self.tool_calls_failed) / self.tool_calls_made if self.tool_calls_made else 0.0

    @classmethod
    def held_out_kwargs(cls, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The kwargs that measure held-out success of a run trained with ``kwargs``."""
        return {**kwargs, **cls.training.held_out}

    @classmethod
    def scripted_agents(cls) -> dict[str, Any]:
        """The family's scripted agents by name, ``act(messages, env) -> the next reply``, with a
        spread of quality (an expert, a partly right one, a harmful one): judge groups mix them in
        (``record_groups(..., scripted_members=k)``) so that a group holds a success where the policy
        rarely succeeds. Empty: the family has none."""
        return {}

    @classmethod
    def scripted_sft_rows(cls, policy: str, episodes: int, seed: int, env_kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        """SFT rows from a scripted agent's solved episodes (``TrainConfig.warm_start =
        "scripted:<policy>"``); a family without scripted agents refuses (see :func:`scripted_sft_rows`)."""
        raise ValueError(f"warm_start 'scripted:{policy}': {cls.__name__} has no scripted agents; "
                         "give a JSONL file of SFT rows instead")

    @classmethod
    def check_kwargs(cls, kwargs: dict[str, Any]) -> None:
        """Refuse unknown or invalid knobs now, with the family's own error (a run checks its
        kwargs this way before its model loads): builds one env and closes it."""
        cls(**dict(kwargs)).close()

    # -- the loop ------------------------------------------------------------------------------

    @property
    def specification(self) -> str:
        """The system prompt of the current episode."""
        return self.messages[0]["content"] if self.messages else ""

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI schemas of the tools the agent sees (also shown to judges)."""
        return [tool.schema for tool in self.tools.values()]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """``options``: ``task_id`` picks the task (same id, same scenario); families may read more."""
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be a dict such as {{'task_id': ...}} or None, got {type(options).__name__}")
        super().reset(seed=seed)
        options = options or {}
        if options.get("task_id") is not None:
            self.task = self.find_task(str(options["task_id"]))
        else:
            self.task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.messages = list(self.first_messages(self.task, options))
        if options.get("hint"):  # e.g. a task's banked rubric items: shown the same way in every family
            self._append_hint(str(options["hint"]))
        self._turn, self._ended = 0, False
        self.tool_calls_made = self.tool_calls_failed = 0
        return list(self.messages), self._info()

    def _append_hint(self, hint: str) -> None:
        index = next((i for i, m in enumerate(self.messages) if m.get("role") == "user"), None)
        if index is None:
            self.messages.append({"role": "user", "content": hint})
        else:
            first = self.messages[index]
            self.messages[index] = {**first, "content": f"{first.get('content') or ''}\n\n{hint}"}

    def _info(self, **extra: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"task_id": str(self.task_id(self.task)), "system_prompt": self.specification,
                                "turn": self._turn, **self.task_info()}
        if self.tool_schemas:
            info["tools"] = self.tool_schemas
        info.update(extra)
        return info

    def step(self, action: Any):
        if self._ended:
            info = self._info(error=ENDED, episode_ended=True, reward_components={}) if self.task is not None else {
                "error": ENDED, "episode_ended": True, "reward_components": {}}
            return list(self.messages), 0.0, True, False, info
        self._turn += 1
        parsed = parse_action(action, max_chars=self.max_action_chars)
        if parsed.invalid:
            self.messages += [{"role": "assistant", "content": parsed.content},
                              {"role": "user", "content": f"Error: {parsed.invalid}"}]
            if self._turn < self.max_turns:
                return self._continue([parsed.invalid])
            return self._finish(None, error=parsed.invalid, truncated=False)
        self.messages.append(parsed.assistant_message())
        if self.tools and self.execute_tools and parsed.wants_tools:
            results, errors = execute_tool_calls(parsed, self.tools, after_each=self.after_tool_call,
                                                 max_seconds=self.max_tool_seconds)
            self.tool_calls_made += len(parsed.tool_calls) + len(parsed.errors)
            self.tool_calls_failed += min(len(errors), len(parsed.tool_calls) + len(parsed.errors))
            self.messages += results
            if self._turn >= self.max_turns:
                return self._finish(None, error=TURN_LIMIT, truncated=True)
            # another turn could add a reply's worth of calls and errors: stay inside the space
            if len(self.messages) + 2 * MAX_TOOL_CALLS + 4 > self.observation_space.max_messages:
                return self._finish(None, error=f"the conversation reached {len(self.messages):,} messages", truncated=True)
            return self._continue(errors)
        return self._finish(parsed, error=None, truncated=False)

    def _continue(self, errors: Sequence[str]):
        extra = {"error": "; ".join(errors)} if errors else {}
        return list(self.messages), 0.0, False, False, self._info(reward_components={}, **extra)

    def _finish(self, final: ParsedAction | None, error: str | None, truncated: bool):
        self._ended = True
        scored = self.score(final)
        partial = {name: float(value) for name, value in self.partial_credit(final, scored).items()}
        if partial:  # kept with the episode: the partial scheme reads it from there
            scored.info = {**scored.info, "partial_credit": partial}
        components = {name: float(value) for name, value in scored.components.items()}
        user = next((m.get("content") or "" for m in self.messages if m.get("role") == "user"), "")
        episode = EpisodeResult(
            task_id=str(self.task_id(self.task)), specification=self.specification, task=user,
            reference=self.reference(), answer=None if final is None else final.content, correct=scored.correct,
            reward=float(scored.reward), reward_components=components, tools=self.tool_schemas or None,
            truncated=truncated, error=error, metadata=scored.info)
        extra: dict[str, Any] = {**scored.info, "reward_components": components, "episode": episode}
        if scored.correct is not None:
            extra["correct"] = bool(scored.correct)
        if error:
            extra["error"] = error
        return list(self.messages), float(scored.reward), not truncated, truncated, self._info(**extra)

    def close(self) -> None:
        """Ends the current episode and releases what the env holds (a family that holds files or
        connections overrides it and calls this); ``reset()`` afterwards starts a new episode, and
        a step before it is answered as a step after the end. ``copy.deepcopy(env)`` gives an
        independent env in the same state (closing one leaves the other working)."""
        self._ended = True
        super().close()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m['role']}] {m.get('content') or m.get('tool_calls')}" for m in self.messages)


def scripted_sft_rows(env: ChatEnv, act: Any, episodes: int, seed: int = 0, every_task: bool = False) -> list[dict[str, Any]]:
    """SFT rows ``{"messages": observation, "completion": reply}`` from the turns of a scripted
    agent's *solved* episodes (the env's own check decides), one row per agent turn: what a
    family's ``scripted_sft_rows`` (``--warm-start scripted:<agent>``) is made of.

    ``act(messages, env)`` gives the next reply; ``every_task`` plays the env's tasks in order
    (at most ``episodes``) instead of drawing them from seeds. The env should be on its training
    split: the rows must never show a held-out task.
    """
    rows: list[dict[str, Any]] = []
    count = min(episodes, len(env.tasks)) if every_task else episodes
    for episode in range(count):
        options = {"task_id": env.task_id(env.tasks[(seed + episode) % len(env.tasks)])} if every_task else None
        obs, _ = env.reset(seed=seed + episode, options=options)
        turns, done, info = [], False, {}
        while not done:
            reply = act(list(obs), env)
            turns.append({"messages": list(obs), "completion": reply})
            obs, _, terminated, truncated, info = env.step(reply)
            done = terminated or truncated
        if info.get("correct"):
            rows += turns
    env.close()
    return rows
