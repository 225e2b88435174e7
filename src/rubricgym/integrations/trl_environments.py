"""TRL's ``environment_factory`` for every rubricgym id: the env's tools as typed methods.

TRL 1.16's ``GRPOTrainer(environment_factory=...)`` builds one env object per rollout, turns its
public methods into tools (names, type hints and docstrings become the schemas the chat template
shows), calls ``reset(**row)`` before generation and ``get_reward()`` after. :func:`environment_class`
makes that class for any registered id, in-process or through a server (``url=``: the same class
plays ``OpenEnv-v0`` sessions of ``rubricgym serve``):

* one method per tool of the env, generated from its OpenAI schema (the calculator, RAG search,
  the shop's nine tools, a BFCL row's functions): each call is an env step with that tool call, so
  the env's own rules, turn limit and transactions hold; the tool's reply is the method's return;
* ``answer(answer)``: the final reply, which ends the episode;
* ``reset(**row)``: the row's ``task_id`` (``seed`` where there is none), as :func:`environment_dataset` writes them;
* ``get_reward()``: the env's reward of the episode (an episode the model never answered is ended
  with an empty reply: the env's score for no answer). A family whose tool calls are the answer
  (BFCL) records the calls and submits them together here.

Judged ids (``MathRuler-v0``) have no ``get_reward``: their reward is the group's, so
:func:`environment_reward` gives the TRL reward function that scores each group of
``num_generations`` rollouts whole with the scheme's scorer (RULER ranks the group's
trajectories), the env reward combined as the variant says.

Examples:
    >>> from rubricgym.integrations.trl_environments import environment_class, environment_dataset
    >>> MathTools = environment_class("Math-v0", levels=[1], tools=["calculator"])
    >>> env = MathTools()
    >>> env.reset(task_id=environment_dataset("Math-v0", 1, levels=[1], tools=["calculator"])[0]["task_id"])
    >>> env.calculator(expression="6*7")
    '42'
    >>> import inspect                       # what TRL lists: public methods (reset and get_reward are not tools)
    >>> sorted(name for name, _ in inspect.getmembers(MathTools, inspect.isfunction) if not name.startswith("_"))
    ['answer', 'calculator', 'get_reward', 'reset']
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any, Optional

import gymnasium as gym

import rubricgym  # noqa: F401  (registers the ids)
from rubricgym.registration import ENVS, base_env_id, env_class, scheme_of, training_kwargs

#: JSON schema types as the Python annotations TRL's schema reader turns back into them
_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}
ENDED = "The episode has ended; nothing more is done."


def method_name(tool: str) -> str:
    """A tool's name as a Python method name (BFCL has ``math.factorial``); the call keeps the tool's own.

    Examples:
        >>> method_name("math.factorial"), method_name("search")
        ('math_factorial', 'search')
    """
    name = re.sub(r"\W", "_", tool)
    return name if name.isidentifier() else f"tool_{name}"


def _tool_method(schema: dict[str, Any], executes: bool):
    """A method named and typed like the tool: a call steps the env with it (or records it, where
    calls are the answer)."""
    function = schema["function"]
    name = function["name"]
    properties = (function.get("parameters") or {}).get("properties") or {}
    required = set((function.get("parameters") or {}).get("required") or [])
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = []
    for arg, spec in properties.items():
        kind = _TYPES.get(spec.get("type"), str)
        annotation = kind if arg in required else Optional[kind]
        parameters.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                            default=inspect.Parameter.empty if arg in required else None))
        annotations[arg] = annotation
        lines.append(f"    {arg}: {spec.get('description') or 'the ' + arg.replace('_', ' ')}")

    def method(self, **arguments: Any) -> str:
        call = {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}
        return self._call_tool(call) if executes else self._record_call(call)

    method.__name__ = method.__qualname__ = method_name(name)
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    method.__annotations__ = annotations
    description = (function.get("description") or name).strip()
    method.__doc__ = f"{description}\n\nArgs:\n" + "\n".join(lines) + "\n\nReturns:\n    The tool's reply.\n" if lines else \
        f"{description}\n\nReturns:\n    The tool's reply.\n"
    return method


def get_reward(self) -> float:
    """The env's reward of the episode (TRL calls it once per rollout; not a tool)."""
    return self._episode_reward()


class EnvironmentTools:
    """The body every generated class shares (TRL lists only the public methods as tools)."""

    env_id: str = ""
    """The base env each rollout plays."""
    registered_id: str = ""
    """The id the class was made for (a judged id's reward function scores only its own rollouts)."""
    env_kwargs: dict[str, Any] = {}
    url: str | None = None

    def __init__(self):
        if self.url:
            self._env = gym.make("OpenEnv-v0", url=self.url)
        else:
            self._env = gym.make(self.env_id, disable_env_checker=True, **self.env_kwargs)
        self._calls: list[dict[str, Any]] = []
        self._ended: tuple[float, dict[str, Any]] | None = None
        self._messages: list[dict[str, Any]] = []

    def reset(self, **row: Any) -> None:
        """Start the row's episode (its ``task_id``, else its ``seed``); the prompt is the row's own."""
        task_id = row.get("task_id")
        self._messages, _ = self._env.reset(seed=row.get("seed"), options={"task_id": task_id} if task_id else None)
        self._calls, self._ended = [], None
        return None

    def answer(self, answer: str) -> str:
        """Give your final answer, in the form the task asks for; this ends the episode.

        Args:
            answer: the final reply, e.g. "The answer is \\boxed{42}."

        Returns:
            A confirmation.
        """
        if self._ended is not None:
            return ENDED
        self._step(answer)
        return "Answer recorded."

    def _episode_reward(self) -> float:
        """The env's reward of the episode, ending it first if the model never answered."""
        if self._ended is None:  # never answered: the env's score for no answer, or the recorded calls
            self._step({"role": "assistant", "content": "", "tool_calls": [{"function": c} for c in self._calls]}
                       if self._calls else "")
        return float(self._ended[0]) if self._ended else 0.0

    # -- the env loop, out of TRL's sight --------------------------------------------------------

    def _step(self, action: Any) -> dict[str, Any]:
        self._messages, reward, terminated, truncated, info = self._env.step(action)
        if terminated or truncated:
            self._ended = (float(reward), info)
        return info

    def _call_tool(self, call: dict[str, Any]) -> str:
        if self._ended is not None:
            return ENDED
        before = len(self._messages)
        info = self._step({"role": "assistant", "content": "", "tool_calls": [{"function": call}]})
        replies = [m.get("content") or "" for m in self._messages[before:] if m.get("role") in ("tool", "user")]
        if self._ended is not None and not replies:
            return f"{ENDED} ({info.get('error') or 'turn limit'})"
        return "\n".join(replies)

    def _record_call(self, call: dict[str, Any]) -> str:
        if self._ended is not None:
            return ENDED
        self._calls.append(call)
        return f"Call {len(self._calls)} recorded; the calls are your answer."

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        """The env's conversation of this rollout (what a group judge reads)."""
        return list(self._messages)

    @property
    def episode(self):
        """The typed episode result (after ``get_reward`` or the final answer), else None."""
        return self._ended[1].get("episode") if self._ended else None


def environment_class(env_id: str = "", url: str | None = None, task_id: str | None = None, **env_kwargs: Any) -> type:
    """The ``environment_factory`` class of ``env_id`` (any registered id; a judged id plays its
    base env, and :func:`environment_reward` scores its groups), over the family's training
    defaults; ``url``: play a ``rubricgym serve`` server of that id instead (the tools are read
    from it); ``task_id``: the task whose tools the class carries, for families whose tools differ
    by task (BFCL; :func:`environment_factories` makes one class per tool set of a dataset).
    """
    from rubricgym.registration import default_env, split_kwargs

    env_id = env_id or default_env()
    base = base_env_id(env_id)
    kwargs, _ = split_kwargs(env_id, training_kwargs(env_id, env_kwargs))
    probe = gym.make("OpenEnv-v0", url=url) if url else gym.make(base, disable_env_checker=True, **kwargs)
    try:
        _, info = probe.reset(seed=0, options={"task_id": task_id} if task_id else None)
        schemas = list(info.get("tools") or [])
    finally:
        probe.close()
    body: dict[str, Any] = {"env_id": base, "env_kwargs": kwargs, "url": url, "registered_id": env_id,
                            "__doc__": f"{env_id} for TRL's environment_factory: its tools, answer(), reset(**row)"
                                       + ("" if scheme_of(env_id) else ", get_reward()") + "."}
    executes = bool(getattr(env_class(env_id), "execute_tools", True))  # False: the calls are the answer (BFCL)
    for schema in schemas:
        name = method_name(schema["function"]["name"])
        if name in body or hasattr(EnvironmentTools, name):
            raise ValueError(f"{env_id}'s tool {schema['function']['name']!r} clashes with the method {name!r}")
        body[name] = _tool_method(schema, executes)
    if scheme_of(env_id) is None:  # a judged id's reward is its group's (environment_reward)
        body["get_reward"] = get_reward
    return type(f"{base.replace('-v0', '')}Tools", (EnvironmentTools,), body)


def environment_factories(env_id: str, rows: Any, url: str | None = None, **env_kwargs: Any) -> tuple[dict[str, type], Any]:
    """A dict ``environment_factory`` with one class per distinct tool set among the tasks of
    ``rows`` (a dataset from :func:`environment_dataset`), and the rows with their ``environment`` (TRL then shows each row its own tools):
    for families whose tools differ by task, as BFCL's rows each bring their functions."""
    from rubricgym.registration import split_kwargs

    kwargs, _ = split_kwargs(env_id, training_kwargs(env_id, env_kwargs))
    probe = gym.make(base_env_id(env_id), disable_env_checker=True, **kwargs)
    names: dict[str, str] = {}
    classes: dict[str, type] = {}
    try:
        for task_id in rows["task_id"]:
            _, info = probe.reset(options={"task_id": task_id})
            key = json.dumps(info.get("tools") or [], sort_keys=True)
            if key not in classes:
                classes[key] = environment_class(env_id, url=url, task_id=task_id, **env_kwargs)
            names[task_id] = f"tools{list(classes).index(key)}"
    finally:
        probe.close()
    factories = {f"tools{i}": cls for i, cls in enumerate(classes.values())}
    return factories, rows.add_column("environment", [names[t] for t in rows["task_id"]])


def without_tool_listing(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the system prompt's lines that are exactly a tool's JSON schema removed
    (envs list their tools for text-only agents; under ``environment_factory`` the chat template
    renders them, and twice costs a thousand tokens of the shop's prompt).

    Examples:
        >>> tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
        >>> without_tool_listing([{"role": "system", "content": "Use tools:\\n" + json.dumps(tool)}], [tool])
        [{'role': 'system', 'content': 'Use tools:'}]
    """
    def is_listed(line: str) -> bool:
        try:
            return json.loads(line) in tools
        except ValueError:
            return False

    return [{**m, "content": "\n".join(line for line in m["content"].split("\n") if not is_listed(line)).rstrip()}
            if m["role"] == "system" else m for m in messages]


def environment_dataset(env_id: str = "", num_tasks: int | None = None, seed: int = 0, tools_in_prompt: bool = False,
                        **env_kwargs: Any):
    """A ``datasets.Dataset`` for the factory: ``prompt`` (the env's first messages) and ``task_id``;
    the system prompt's own listing of the tools is dropped unless ``tools_in_prompt`` (the chat
    template shows TRL's rendering of them)."""
    from rubricgym.integrations.trl import EnvRollout

    from rubricgym.registration import split_kwargs

    rollout = EnvRollout(env_id, **env_kwargs)
    rows = rollout.dataset(num_tasks, seed=seed)
    if tools_in_prompt:
        return rows
    base_kwargs, _ = split_kwargs(rollout.config.env_id, rollout.env_kwargs)
    env = gym.make(base_env_id(rollout.config.env_id), disable_env_checker=True, **base_kwargs)
    try:
        tools = [env.reset(options={"task_id": task_id})[1].get("tools") or [] for task_id in rows["task_id"]]
    finally:
        env.close()
    return rows.map(lambda row, index: {"prompt": without_tool_listing(row["prompt"], tools[index])}, with_indices=True)


class EnvironmentGroupReward:
    """The TRL reward function of a judged id under ``environment_factory``: each group of
    ``num_generations`` rollouts (consecutive, as GRPOTrainer passes them) scored whole by the
    scheme's scorer from the envs' trajectories and episode results. A failed judge gives None
    for its group (TRL leaves it out), after the judge client's own retries."""

    def __init__(self, env_id: str, num_generations: int, **knobs: Any):
        from rubricgym.registration import SCHEMES

        scheme = scheme_of(env_id)
        if scheme is None:
            raise ValueError(f"{env_id} is not a judged id: its environment class's get_reward is its reward")
        _, scorer_knobs, _ = SCHEMES[scheme.name].split({**ENVS[env_id].kwargs, **knobs})
        scorer_knobs.pop("base_env", None)
        self.scorer = scheme.build_scorer(scorer_knobs)
        self.env_id, self.num_generations = env_id, num_generations
        self.__name__ = scheme.name  # TRL logs each reward function under its __name__
        self.groups_scored = 0

    def __call__(self, prompts: list[Any], completions: list[Any], environments: list[EnvironmentTools] | None = None,
                 **kwargs: Any) -> list[float | None]:
        from rubricgym.integrations.trl import groups_of
        from rubricgym.judges.base import Member, run_sync, score_or_fail

        if environments is None:
            raise ValueError("this reward function reads the rollouts' environments: pass environment_factory to GRPOTrainer")
        rewards: list[float | None] = []
        for start in groups_of(prompts, self.num_generations):
            group = environments[start:start + self.num_generations]
            if any(getattr(env, "registered_id", None) != self.env_id for env in group):
                rewards += [None] * len(group)  # another environment's rollouts (a dict environment_factory)
                continue
            for env in group:
                if env.episode is None:
                    env._episode_reward()  # ends an unanswered episode the way the env scores no answer
            members = [Member(env.trajectory, env.episode) for env in group]
            result = run_sync(score_or_fail(self.scorer, members[0].episode.task_id, members))
            self.groups_scored += 1
            rewards += [None if result.failed else float(score.reward) for score in result.members]
        return rewards


def environment_reward(env_id: str, num_generations: int, **knobs: Any) -> EnvironmentGroupReward | None:
    """The reward function a judged id needs beside its environment class (None for a base id,
    whose class's ``get_reward`` is its reward). ``knobs``: the scheme's (``judge``, ``combine`` ...)."""
    return EnvironmentGroupReward(env_id, num_generations, **knobs) if scheme_of(env_id) else None


def with_tool_template(tokenizer: Any) -> Any:
    """``tokenizer`` able to render and parse tool calls for ``environment_factory``: unchanged if
    its chat template already can; else TRL's Qwen2.5 template, which speaks the same ChatML tokens
    (``<|im_start|>``) as SmolLM2 and which TRL knows how to parse (SmolLM2's own template drops
    tool calls). Decided here, not hidden: a model whose tokens are not ChatML needs its own template."""
    from trl.chat_template_utils import qwen2_5_chat_template, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer
