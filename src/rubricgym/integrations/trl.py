"""rubricgym envs and judged rewards inside TRL's ``GRPOTrainer``.

``EnvRollout`` is a ``rollout_func``: every prompt's group of ``num_generations`` completions is
played through the group vector env of any registered id (single- or multi-turn, tools
included), so a RULER or rubric judge sees each group whole. Generation is the trainer's own:
transformers on the model being trained, or TRL's vLLM engine when ``use_vllm=True``. Each
episode reaches TRL as one completion whose env tokens are masked out (``env_mask``), with
its env-loop reward, reward components and correctness as extra fields; :func:`env_reward`
is the reward function that returns that reward.

Example (CPU, the default model; see README "Use with TRL / verl"):

    from trl import GRPOConfig, GRPOTrainer
    from rubricgym.integrations.trl import EnvRollout, env_reward

    rollout = EnvRollout("MathRuler-v0", levels=(1,))
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,
                          train_dataset=rollout.dataset(64), rollout_func=rollout,
                          args=GRPOConfig(num_generations=4, per_device_train_batch_size=8, ...),
                          peft_config=LoraConfig(r=16, task_type="CAUSAL_LM"))
    trainer.train()

For users who keep TRL's own generation, :class:`RulerReward` and :class:`RubricReward` score
completion lists as plain ``reward_funcs`` (groups of ``num_generations``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

import rubricgym  # noqa: F401  (registers the ids)
from rubricgym.integrations.transcript import TokenTranscript
from rubricgym.openenv.client import served_variant
from rubricgym.registration import check_env_kwargs, default_env, training_kwargs

#: token ids, their log-probs and the decoded text of one sampled turn
Generated = tuple[list[int], list[float], str]


@dataclass
class EnvRolloutConfig:
    """Every knob of :class:`EnvRollout`."""

    env_id: str = ""
    """A registered id (``rubricgym envs``; empty: the default family's): judged variants score each group whole."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the env (``levels``, ``tools``, ``judge`` ...), over the family's training defaults."""
    env_servers: str = ""
    """Comma-separated OpenEnv servers (``rubricgym serve <base id>``, started with the same family
    knobs) that play the episodes, a group's members spread over them in turn; the env's reward
    scheme still scores each group whole here. The dataset's tasks are read in this process."""
    max_new_tokens: int | None = None
    """Tokens per model turn; None: the trainer's ``max_completion_length``."""
    max_steps: int = 32
    """A group that has not finished after this many env steps is an error (a runaway loop)."""
    log_prefix: str = "rubricgym/"
    """Prefix of the metrics logged into the trainer (reward components, correctness, turns)."""


def check_whole_groups(trainer: Any, num_generations: int) -> None:
    """Refuse settings where TRL splits one prompt's group across processes (a group judge would
    then see partial groups): every process must get whole groups."""
    processes = getattr(getattr(trainer, "accelerator", None), "num_processes", 1)
    per_device = trainer.args.per_device_train_batch_size
    if processes > 1 and per_device % num_generations:
        raise ValueError(
            f"per_device_train_batch_size={per_device} is not a multiple of num_generations={num_generations} on "
            f"{processes} processes: TRL would split a group across processes and the env's group judge would see "
            "partial groups. Make per_device_train_batch_size a multiple of num_generations.")


def groups_of(prompts: Sequence[Any], size: int) -> list[int]:
    """The start index of each group: ``prompts`` must be runs of ``size`` identical prompts."""
    if len(prompts) % size:
        raise ValueError(f"{len(prompts)} prompts are not whole groups of num_generations={size}; "
                         "see check_whole_groups")
    starts = list(range(0, len(prompts), size))
    for start in starts:
        if any(prompts[start + k] != prompts[start] for k in range(size)):
            raise ValueError(f"prompts {start}..{start + size - 1} are not one prompt's group: TRL split a group "
                             "(make per_device_train_batch_size a multiple of num_generations)")
    return starts


def member_info(info: dict[str, Any], index: int) -> dict[str, Any]:
    """Member ``index``'s own info out of a vector env's batched info (nested dicts included)."""
    own = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        present = info.get("_" + key)
        if present is not None and not present[index]:
            continue
        own[key] = member_info(value, index) if isinstance(value, dict) else value[index]
    return own


def _key(prompt: Any) -> str:
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


@dataclass
class Episode:
    """One member's episode as the trainer gets it."""

    transcript: TokenTranscript
    reward: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    correct: bool = False
    task_id: str = ""
    final_info: dict[str, Any] = field(default_factory=dict)


def play_groups(envs: Any, task_ids: Sequence[str], generate: Callable[[list[list[int]]], list[Generated]],
                tokenizer: Any, max_steps: int = 32) -> list[Episode]:
    """Play one episode per member of every group (group ``g`` on task ``task_ids[g]``) through
    ``envs.reset`` / ``envs.step``; ``generate`` samples one turn for each token context."""
    base = envs.unwrapped
    n = base.num_envs
    obs, _ = envs.reset(options={"task_ids": list(task_ids)})
    episodes = [Episode(TokenTranscript.start(tokenizer, obs[i]), task_id=str(task_ids[base.group_of(i)]))
                for i in range(n)]
    playing = np.ones(n, dtype=bool)
    group_done = np.zeros(base.num_groups, dtype=bool)
    for _ in range(max_steps):
        acting = [i for i in range(n) if playing[i]]
        actions: list[str] = [""] * n
        for i, (ids, logprobs, text) in zip(acting, generate([episodes[i].transcript.context for i in acting])):
            episodes[i].transcript.add_model_turn(ids, logprobs)
            actions[i] = text
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        if "next_role" in info and np.asarray(info.get("_next_role", [])).any():
            raise ValueError("this env hands the next turn to another role (a policy-written rubric): TRL trains one "
                             "completion per prompt; give the env a fixed rubricator (rubricator=<model>)")
        # its own episode ended: flagged while others run; at the group's last step, terminated/truncated
        member_done = info.get("member_done", np.zeros(n, dtype=bool)) | terminated | truncated
        for i in acting:
            if member_done[i]:
                playing[i] = False
            else:
                episodes[i].transcript.add_env_turn(obs[i], next_obs[i])
        for i in range(n):
            episodes[i].reward += float(rewards[i])
        for g in range(base.num_groups):
            members = list(base.members(g))
            if group_done[g] or not (terminated[members] | truncated[members]).all():
                continue
            group_done[g] = True
            for i in members:
                final = member_info(info, i)
                episodes[i].final_info = final
                episodes[i].components = {k: float(v) for k, v in (final.get("reward_components") or {}).items()}
                episodes[i].correct = bool(final.get("correct", False))
        obs = next_obs
        if group_done.all():
            return episodes
    raise RuntimeError(f"episodes did not finish within {max_steps} env steps")


class EnvRollout:
    """A TRL ``rollout_func`` that plays each prompt's group through a rubricgym env.

    ``dataset()`` builds the matching train dataset (the env's first messages as ``prompt``,
    plus ``task_id``); each prompt is mapped back to its task when its group is played.
    Extra fields for reward functions: ``env_reward``, ``reward_components``, ``correct``,
    ``task_id``, ``turns``.
    """

    def __init__(self, env_id: str | None = None, config: EnvRolloutConfig | None = None, **env_kwargs: Any):
        if config is not None and (env_id is not None or env_kwargs):
            raise TypeError("pass either an EnvRolloutConfig or env_id and env keyword arguments, not both")
        self.config = config or EnvRolloutConfig(env_id=env_id or "", env_kwargs=env_kwargs)
        self.config.env_id = self.config.env_id or default_env()
        if self.config.env_id not in gym.registry:
            raise ValueError(f"unknown env id {self.config.env_id!r}; `rubricgym envs` lists them")
        # the family's training defaults under the given kwargs, checked now (before any model work)
        self.env_kwargs = training_kwargs(self.config.env_id, self.config.env_kwargs)
        check_env_kwargs(self.config.env_id, self.env_kwargs)
        #: the id and kwargs that play the groups: the env itself, or OpenEnv-v0 on the servers
        self.rollout_env = (self.config.env_id, self.env_kwargs) if not self.config.env_servers else \
            served_variant(self.config.env_id, self.env_kwargs, self.config.env_servers)
        self._task_of_prompt: dict[str, str] = {}
        self._envs: dict[tuple[int, int], Any] = {}
        self.groups_played = 0
        self.group_sizes: list[int] = []
        """Members per played group, in order (the judge scored each of these groups whole)."""

    # -- the dataset ---------------------------------------------------------------------------

    def dataset(self, num_tasks: int | None = None, task_ids: Sequence[str] | None = None, seed: int = 0):
        """A ``datasets.Dataset`` of the env's tasks: ``prompt`` (the env's first messages) and ``task_id``."""
        from datasets import Dataset

        env = gym.make(self.config.env_id, disable_env_checker=True, **self.env_kwargs)
        try:
            if task_ids is None:
                tasks = env.unwrapped.tasks
                order = np.random.default_rng(seed).permutation(len(tasks))[:num_tasks or len(tasks)]
                task_ids = [str(env.unwrapped.task_id(tasks[int(k)])) for k in order]
            rows = []
            for task_id in task_ids:
                prompt, _ = env.reset(options={"task_id": task_id})
                prompt = [{"role": m["role"], "content": m.get("content") or ""} for m in prompt]
                self._task_of_prompt[_key(prompt)] = str(task_id)
                rows.append({"prompt": prompt, "task_id": str(task_id)})
        finally:
            env.close()
        return Dataset.from_list(rows)

    def task_id_of(self, prompt: Any) -> str:
        task_id = self._task_of_prompt.get(_key(prompt))
        if task_id is None:
            raise KeyError("a prompt that EnvRollout.dataset() did not build: build the train dataset with it "
                           "(its prompts are the env's own first messages)")
        return task_id

    # -- generation ------------------------------------------------------------------------------

    def _generator(self, trainer: Any) -> Callable[[list[list[int]]], list[Generated]]:
        tokenizer = trainer.processing_class
        max_new_tokens = self.config.max_new_tokens or trainer.args.max_completion_length
        if getattr(trainer, "use_vllm", False):
            def generate_vllm(contexts: list[list[int]]) -> list[Generated]:
                # TRL's engine (colocate or server), one sample per context; weights synced by TRL
                _, completions, logprobs, _ = trainer.vllm_generation.generate(contexts, None, num_generations=1)
                return [(list(ids), [float(lp[0]) if isinstance(lp, (list, tuple)) else float(lp) for lp in lps],
                         tokenizer.decode(ids, skip_special_tokens=True)) for ids, lps in zip(completions, logprobs)]
            return generate_vllm

        from rubricgym.sampling import generate_with_logprobs

        model = trainer.accelerator.unwrap_model(trainer.model)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token

        def generate_transformers(contexts: list[list[int]]) -> list[Generated]:
            # TRL's own model samples (its weights, its device); its training mode is restored
            was_training = model.training
            try:
                generated = generate_with_logprobs(model, tokenizer, contexts, max_new_tokens, trainer.args.temperature,
                                                   trainer.args.top_p)
            finally:
                model.train(was_training)
            return [(g.completion_ids, g.logprobs, g.text) for g in generated]
        return generate_transformers

    # -- the rollout function --------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        mode = "train" if trainer.model.training else "eval"
        size = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        check_whole_groups(trainer, size)
        starts = groups_of(prompts, size)
        task_ids = [self.task_id_of(prompts[start]) for start in starts]
        key = (len(prompts), size)
        if key not in self._envs:
            rollout_id, rollout_kwargs = self.rollout_env
            self._envs[key] = gym.make_vec(rollout_id, num_envs=len(prompts), group_size=size, **rollout_kwargs)
        episodes = play_groups(self._envs[key], task_ids, self._generator(trainer), trainer.processing_class,
                               self.config.max_steps)
        self.groups_played += len(starts)
        self.group_sizes += [size] * len(starts)
        self._log(trainer, mode, episodes)
        return {
            "prompt_ids": [e.transcript.prompt_ids for e in episodes],
            "completion_ids": [e.transcript.completion_ids for e in episodes],
            "logprobs": [e.transcript.logprobs for e in episodes],
            "env_mask": [e.transcript.env_mask for e in episodes],
            "env_reward": [e.reward for e in episodes],
            "reward_components": [e.components for e in episodes],
            "correct": [e.correct for e in episodes],
            "task_id": [e.task_id for e in episodes],
            "turns": [e.transcript.turns for e in episodes],
        }

    def _log(self, trainer: Any, mode: str, episodes: list[Episode]) -> None:
        """Every reward component, correctness, turns and judge failures as trainer metrics."""
        metrics = getattr(trainer, "_metrics", None)
        if metrics is None:
            return
        values: dict[str, list[float]] = defaultdict(list)
        for episode in episodes:
            for name, value in episode.components.items():
                values[f"reward_components/{name}"].append(value)
            values["correct"].append(float(episode.correct))
            values["turns"].append(float(episode.transcript.turns))
            values["env_reward"].append(episode.reward)
            for flag in ("group_failed",):
                if flag in episode.final_info:
                    values[flag].append(float(bool(episode.final_info[flag])))
        for name, items in values.items():
            metrics[mode][self.config.log_prefix + name].append(float(np.mean(items)))

    def close(self) -> None:
        for envs in self._envs.values():
            envs.close()
        self._envs.clear()


def env_reward(prompts: Any = None, completions: Any = None, env_reward: Sequence[float] | None = None,
               **kwargs: Any) -> list[float]:
    """The env-loop reward of each episode (RULER and rubric scores included), as TRL reward function."""
    if env_reward is None:
        raise ValueError("env_reward needs the EnvRollout rollout function (it supplies the env_reward field)")
    return [float(r) for r in env_reward]


# -- judged rewards without the env loop ---------------------------------------------------------

def _text(completion: Any) -> str:
    """A TRL completion (text, or a conversational list of messages) as the reply text."""
    if isinstance(completion, str):
        return completion
    return "\n".join(str(m.get("content") or "") for m in completion if m.get("role") == "assistant")


def _messages(prompt: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


class JudgedReward:
    """A group scorer (RULER, RLCER) as a plain TRL reward function: completion lists in, one
    score per completion out, judged in groups of ``num_generations`` (consecutive completions of
    one prompt, as GRPOTrainer passes them). A failed judge gives ``None`` for its group, which
    TRL leaves out of the reward (the judge client already retried it); the warning is printed
    once per cause by the scorer.

    ``correct(reply, **row)`` tells the scorer which replies are right (RLCER needs it to test its
    rubrics; RULER does not); ``base_reward`` is then the env-like reward each member starts from.
    """

    def __init__(self, scorer: Any, num_generations: int, correct: Callable[..., bool] | None = None,
                 name: str | None = None, correct_reward: float = 1.0, incorrect_reward: float = -1.0):
        self.scorer, self.num_generations, self.correct = scorer, num_generations, correct
        self.correct_reward, self.incorrect_reward = correct_reward, incorrect_reward
        self.__name__ = name or scorer.name  # TRL logs each reward function under its __name__
        self.groups_scored = 0

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        from rubricgym.judges.base import Member, run_sync, score_or_fail
        from rubricgym.records import EpisodeResult

        rewards: list[float | None] = []
        for start in groups_of(prompts, self.num_generations):
            members = []
            for k in range(start, start + self.num_generations):
                messages = _messages(prompts[k])
                reply = _text(completions[k])
                row = {key: value[k] for key, value in kwargs.items() if isinstance(value, list) and len(value) == len(prompts)}
                correct = bool(self.correct(reply, **row)) if self.correct else None
                base = 0.0 if correct is None else (self.correct_reward if correct else self.incorrect_reward)
                system = next((m.get("content") or "" for m in messages if m["role"] == "system"), "")
                task = next((m.get("content") or "" for m in messages if m["role"] == "user"), "")
                episode = EpisodeResult(task_id=str(row.get("task_id", start)), specification=system, task=task,
                                        answer=reply, correct=correct, reward=base)
                members.append(Member(messages + [{"role": "assistant", "content": reply}], episode))
            result = run_sync(score_or_fail(self.scorer, str(start), members))
            self.groups_scored += 1
            rewards += [None if result.failed else float(score.reward) for score in result.members]
        return rewards


def ruler_reward(num_generations: int, judge: Any = "local", rubric: str | None = None, combine: Any = "replace",
                 correct: Callable[..., bool] | None = None, **ruler_config: Any) -> JudgedReward:
    """RULER as a TRL reward function: each group of ``num_generations`` completions ranked by one
    judge call (``judge``: a LiteLLM model string, ``"local"``, or an ``LLM`` with its cache,
    retries and concurrency limit). ``combine="replace"``: the judge's score alone.

    Examples:
        >>> trainer = GRPOTrainer(..., reward_funcs=ruler_reward(4, judge="openai/gpt-4o-mini"))  # doctest: +SKIP
    """
    from rubricgym.judges.ruler import RulerConfig, RulerScorer

    config = RulerConfig(**({"rubric": rubric} if rubric else {}), **ruler_config)
    return JudgedReward(RulerScorer(judge, config, combine=combine), num_generations, correct, name="ruler")


def rubric_reward(num_generations: int, correct: Callable[..., bool], verifier: Any = "local",
                  rubricator: Any = "local", **rubric_config: Any) -> JudgedReward:
    """RLCER as a TRL reward function: a fixed LLM writes rubrics for each group, the verifier
    checks every completion against them, only rubrics that track ``correct`` count; the reward is
    the correctness reward plus the CoT (rubric) reward.

    Examples:
        >>> from rubricgym.envs.math import math_correct
        >>> reward = rubric_reward(4, correct=math_correct(), verifier="openai/gpt-4o-mini",
        ...                        rubricator="openai/gpt-4o-mini")                          # doctest: +SKIP
    """
    from rubricgym.judges.rlcer import RubricConfig, RubricScorer

    if isinstance(rubricator, str) and rubricator == "policy":
        raise ValueError("a reward function cannot make the policy write rubrics (that is a second turn): "
                         "use the MathRubric-v0 env with EnvRollout, or give a fixed rubricator model")
    scorer = RubricScorer(RubricConfig(verifier=verifier, rubricator=rubricator, **rubric_config))
    return JudgedReward(scorer, num_generations, correct, name="rubric")
