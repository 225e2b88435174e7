"""rubricgym envs and judged rewards inside verl.

* :class:`RubricgymAgentLoop` (``agent_name: rubricgym_env``) plays one rubricgym episode per
  dataset row: the env id, task id and env kwargs come from the row's ``extra_info``, generation
  goes through verl's ``server_manager`` (token ids in, token ids out), tool results and other
  env turns are in the response with ``response_mask`` 0, and ``reward_score`` is the env's
  reward. The episode result and messages travel in ``extra_fields`` for the reward stage.
* verl runs one agent loop per trajectory, so a group judge cannot live there.
  :class:`GroupJudgedAgentLoopManager` (``actor_rollout_ref.rollout.agent.agent_loop_manager_class``)
  runs verl's own manager, then :func:`rescore_batch`: every ``uid`` group of a judged id
  (``MathRuler-v0``, ``RagSupportRuler-v0``, ``MathRubric-v0`` with a fixed rubricator ...) is
  scored whole by the id's scorer and its ``rm_scores`` rewritten.
* :func:`write_dataset` writes the parquet verl reads (``prompt``, ``agent_name``, ``extra_info``).

See ``examples/verl/`` for a config and the launch command for one GPU.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Sequence
from uuid import uuid4

import gymnasium as gym
import numpy as np

import rubricgym  # noqa: F401  (registers the ids)
from rubricgym.integrations.transcript import TokenTranscript
from rubricgym.registration import ENVS, base_env_id, scheme_of, split_kwargs, training_kwargs

from verl.experimental.agent_loop.agent_loop import (  # noqa: E402  (verl is this module's reason to exist)
    AgentLoopBase,
    AgentLoopManager,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.utils.ray_utils import auto_await  # noqa: E402

AGENT_NAME = "rubricgym_env"


def dataset_rows(env_id: str, num_tasks: int | None = None, seed: int = 0, **env_kwargs: Any) -> list[dict[str, Any]]:
    """verl rows for ``env_id``'s tasks: the env's first messages as ``prompt``, the loop's name,
    and ``extra_info`` with the env id, task id and env kwargs (JSON) the agent loop replays."""
    env = gym.make(base_env_id(env_id), disable_env_checker=True, **_env_kwargs(env_id, env_kwargs))
    try:
        tasks = env.unwrapped.tasks
        order = np.random.default_rng(seed).permutation(len(tasks))[:num_tasks or len(tasks)]
        rows = []
        for index in order:
            task_id = str(env.unwrapped.task_id(tasks[int(index)]))
            prompt, _ = env.reset(options={"task_id": task_id})
            rows.append({
                "data_source": f"rubricgym/{env_id}", "agent_name": AGENT_NAME,
                "prompt": [{"role": m["role"], "content": m.get("content") or ""} for m in prompt],
                "reward_model": {"style": "rubricgym", "ground_truth": env.unwrapped.reference() or ""},
                "extra_info": {"env_id": env_id, "task_id": task_id, "env_kwargs": json.dumps(env_kwargs)},
            })
        return rows
    finally:
        env.close()


def write_dataset(path: str, env_id: str, num_tasks: int | None = None, seed: int = 0, **env_kwargs: Any) -> str:
    """Write :func:`dataset_rows` as the parquet file verl's ``data.train_files`` reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(dataset_rows(env_id, num_tasks, seed, **env_kwargs)), path)
    return path


def _env_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The base env's share of a (possibly judged) id's kwargs over the family's training
    defaults: scorer knobs stay with the reward stage."""
    return split_kwargs(env_id, training_kwargs(env_id, kwargs))[0]


@register(AGENT_NAME)
class RubricgymAgentLoop(AgentLoopBase):
    """One rubricgym episode per row (single- or multi-turn, tools included) on verl's server."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        if "env_id" not in extra or "task_id" not in extra:
            raise ValueError("a rubricgym_env row needs extra_info.env_id and extra_info.task_id "
                             "(write the dataset with rubricgym.integrations.verl.write_dataset)")
        env_id = str(extra["env_id"])
        env_kwargs = _env_kwargs(env_id, json.loads(extra.get("env_kwargs") or "{}"))
        response_length = int(self.rollout_config.response_length)
        env = gym.make(base_env_id(env_id), disable_env_checker=True, **env_kwargs)
        loop = asyncio.get_running_loop()
        try:
            obs, _ = env.reset(options={"task_id": str(extra["task_id"])})
            messages = list(obs)
            transcript = TokenTranscript.start(self.tokenizer, obs)
            reward, info, ended = 0.0, {}, False
            while not ended and len(transcript.completion_ids) < response_length:
                output = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=transcript.context,
                                                            sampling_params=sampling_params)
                # a reply past the response budget is cut before the env sees it: the trainer's tokens and
                # the reward then describe the same reply
                remaining = response_length - len(transcript.completion_ids)
                ids = list(output.token_ids)[:remaining]
                logprobs = list(output.log_probs)[:remaining] if output.log_probs else [0.0] * len(ids)
                transcript.add_model_turn(ids, logprobs)
                action = self.tokenizer.decode(ids, skip_special_tokens=True)
                # env steps may run tools (sandboxed subprocesses, SQLite): keep them off the event loop
                next_obs, step_reward, terminated, truncated, info = await loop.run_in_executor(None, env.step, action)
                reward += float(step_reward)
                messages = list(next_obs)
                ended = bool(terminated or truncated)
                if not ended:
                    transcript.add_env_turn(obs, next_obs)
                    obs = next_obs
            episode = info.get("episode")
        finally:
            env.close()
        cut = slice(0, response_length)
        return AgentLoopOutput(
            prompt_ids=transcript.prompt_ids, response_ids=transcript.completion_ids[cut],
            response_mask=transcript.env_mask[cut], response_logprobs=transcript.logprobs[cut],
            reward_score=reward, num_turns=2 * transcript.turns, metrics=AgentLoopMetrics(),
            extra_fields={"rubricgym_episode": episode.model_dump() if episode is not None else None,
                          "rubricgym_messages": messages,
                          "rubricgym_env_id": env_id, "reward_components": dict(info.get("reward_components") or {}),
                          "turn_scores": [], "tool_rewards": []})


_SCORERS: dict[str, Any] = {}


def scorer_for(env_id: str) -> Any | None:
    """The group scorer of a judged id (RULER, rubric, function), built once; None for a base id."""
    scheme = scheme_of(env_id)
    if scheme is None:
        return None
    if env_id not in _SCORERS:
        _, knobs, _ = scheme.split(ENVS[env_id].kwargs)
        _SCORERS[env_id] = scheme.build_scorer(knobs)
    return _SCORERS[env_id]


async def rescore_rows(env_ids: Sequence[str], uids: Sequence[str], episodes: Sequence[dict | None],
                       messages: Sequence[list], scorers: dict[str, Any] | None = None) -> tuple[list[float | None], list[dict]]:
    """New rewards for rows of judged ids, each ``uid`` group scored whole (None: leave the row's
    reward as it is: a base id, a failed judge, or an episode without a result)."""
    from rubricgym.judges.base import Member, score_or_fail
    from rubricgym.records import EpisodeResult

    rewards: list[float | None] = [None] * len(uids)
    infos: list[dict] = [{} for _ in uids]
    groups: dict[str, list[int]] = {}
    for row, uid in enumerate(uids):
        groups.setdefault(str(uid), []).append(row)
    jobs = []
    for uid, rows in groups.items():
        env_id = str(env_ids[rows[0]])
        scorer = (scorers or {}).get(env_id) or scorer_for(env_id)
        if scorer is None or any(episodes[r] is None for r in rows):
            continue
        members = [Member(list(messages[r]), EpisodeResult.model_validate(episodes[r])) for r in rows]
        jobs.append((rows, score_or_fail(scorer, uid, members)))
    results = await asyncio.gather(*(job for _, job in jobs))
    for (rows, _), result in zip(jobs, results):
        for row, score in zip(rows, result.members):
            infos[row] = {"components": dict(score.components), "failed": bool(result.failed)}
            if not result.failed:
                rewards[row] = float(score.reward)
    return rewards, infos


def rescore_batch(output: Any, scorers: dict[str, Any] | None = None) -> Any:
    """Rewrite ``rm_scores`` of a generated verl batch (a ``DataProto`` from :class:`RubricgymAgentLoop`)
    with each judged id's group score, groups by ``uid``; returns the batch."""
    from rubricgym.judges.base import run_sync

    return run_sync(_rescore_batch(output, scorers))


async def _rescore_batch(output: Any, scorers: dict[str, Any] | None = None) -> Any:
    batch, extra = output.batch, output.non_tensor_batch
    if "uid" not in extra:
        raise ValueError("the batch has no uid column: verl's trainer sets one per prompt before repeating it n times")
    if "rubricgym_episode" not in extra:
        return output  # not played by the rubricgym agent loop
    rewards, infos = await rescore_rows(list(extra["rubricgym_env_id"]), list(extra["uid"]), list(extra["rubricgym_episode"]),
                                        list(extra["rubricgym_messages"]), scorers)
    prompt_length = batch["prompts"].shape[1]
    last = batch["attention_mask"][:, prompt_length:].sum(dim=1) - 1
    for row, reward in enumerate(rewards):
        if reward is not None:
            batch["rm_scores"][row].zero_()
            batch["rm_scores"][row, int(last[row])] = reward
    output.non_tensor_batch["judge_failed"] = np.array([bool(i.get("failed", False)) for i in infos], dtype=object)
    return output


class GroupJudgedAgentLoopManager(AgentLoopManager):
    """verl's agent loop manager, then every ``uid`` group of a judged id scored whole
    (``actor_rollout_ref.rollout.agent.agent_loop_manager_class=rubricgym.integrations.verl.GroupJudgedAgentLoopManager``)."""

    @auto_await
    async def generate_sequences(self, prompts: Any) -> Any:
        output = await super().generate_sequences(prompts)
        return await _rescore_batch(output)
