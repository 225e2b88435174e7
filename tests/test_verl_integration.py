"""verl's real AgentLoopBase plays rubricgym episodes against a generation server double that
returns fixed token ids (as verl's own CPU agent-loop tests do); the group rescoring by uid."""

import asyncio
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import require

require("verl", "verl")
from judges import reply_scores, scripted_judge, trajectory_blocks  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from rubricgym.integrations import verl as rv  # noqa: E402
from rubricgym.judges.ruler import RulerScorer  # noqa: E402

CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'


class FixedReplies:
    """A verl server manager double: each generate() returns the next scripted reply's token ids."""

    def __init__(self, tokenizer, replies):
        end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.replies = [tokenizer.encode(r, add_special_tokens=False) + [end] for r in replies]
        self.prompts = []

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        self.prompts.append(list(prompt_ids))
        ids = self.replies[len(self.prompts) - 1]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


@pytest.fixture(scope="module")
def tokenizer():
    from rubricgym.models import resolve_model_path
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(None))


def agent_loop(tokenizer, server, response_length=512):
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": response_length}}})
    return rv.RubricgymAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                                 processor=None, dataset_cls=None, data_config=DictConfigWrap(OmegaConf.create({})))


def run(loop, row):
    return asyncio.run(loop.run({"temperature": 1.0}, **row))


def test_math_with_tools_masks_the_tool_turn_and_scores_the_answer(tokenizer):
    row = next(r for r in rv.dataset_rows("Math-v0", num_tasks=20, levels=(4,), tools=["calculator"], max_turns=3)
               if r["extra_info"]["task_id"].startswith("gen-L4"))
    expression = row["prompt"][1]["content"].removeprefix("What is ").removesuffix("?")
    from rubricgym.envs.math.tasks import parse_task_id

    answer = parse_task_id(row["extra_info"]["task_id"]).answer
    server = FixedReplies(tokenizer, [f"Let me compute. {CALC % expression}", f"So \\boxed{{{answer}}}."])
    output = run(agent_loop(tokenizer, server), row)
    assert output.reward_score == 1.0 and output.num_turns == 4
    first, second = server.replies
    mask, response = output.response_mask, output.response_ids
    assert response[:len(first)] == first and mask[:len(first)] == [1] * len(first)
    assert response[-len(second):] == second and mask[-len(second):] == [1] * len(second)
    env_turn = response[len(first):len(response) - len(second)]
    assert mask[len(first):len(response) - len(second)] == [0] * len(env_turn) and env_turn
    assert f"Tool result (calculator): {answer}" in tokenizer.decode(env_turn)
    assert output.response_logprobs == [-0.5] * len(first) + [0.0] * len(env_turn) + [-0.5] * len(second)
    assert server.prompts[1] == output.prompt_ids + response[:len(first) + len(env_turn)]  # conditioned on exactly this
    assert output.extra_fields["rubricgym_episode"]["correct"] is True
    assert output.extra_fields["rubricgym_messages"][-1]["content"] == f"So \\boxed{{{answer}}}."


def test_rag_support_episode_reward_matches_the_env(tokenizer):
    rows = rv.dataset_rows("RagSupport-v0", num_tasks=3)
    reply = "Orders ship within 2 business days [REF-01]."
    output = run(agent_loop(tokenizer, FixedReplies(tokenizer, [reply])), rows[0])
    env = gym.make("RagSupport-v0")
    env.reset(options={"task_id": rows[0]["extra_info"]["task_id"]})
    _, expected, *_ , info = env.step(reply)
    assert output.reward_score == pytest.approx(expected) and output.response_mask == [1] * len(output.response_ids)
    assert output.extra_fields["reward_components"] == pytest.approx(info["reward_components"])
    assert rows[0]["reward_model"]["ground_truth"] and "answer" not in rows[0]["extra_info"]


def test_a_reply_past_the_response_budget_is_cut_before_the_env_sees_it(tokenizer):
    row = rv.dataset_rows("Math-v0", num_tasks=1, levels=(1,))[0]
    server = FixedReplies(tokenizer, ["x " * 40 + "\\boxed{1}"])
    output = run(agent_loop(tokenizer, server, response_length=8), row)
    assert output.response_ids == server.replies[0][:8] and output.response_mask == [1] * 8
    assert output.extra_fields["rubricgym_episode"]["answer"] == tokenizer.decode(server.replies[0][:8])
    assert output.reward_score == -1.0  # the boxed answer was past the budget: the env never saw it


def test_rescore_batch_judges_each_uid_group_whole(tokenizer):
    from verl import DataProto

    rows = rv.dataset_rows("Math-v0", num_tasks=2, levels=(1,))
    outputs, uids = [], []
    for g, row in enumerate(rows):
        for quality in (0.9, 0.3):
            server = FixedReplies(tokenizer, [f"quality={quality} \\boxed{{1}}"])
            outputs.append(run(agent_loop(tokenizer, server), {**row, "extra_info": {**row["extra_info"], "env_id": "MathRuler-v0"}}))
            uids.append(f"uid-{g}")
    width = max(len(o.response_ids) for o in outputs)
    responses = torch.zeros(len(outputs), width, dtype=torch.long)
    attention = torch.zeros(len(outputs), 4 + width, dtype=torch.long)
    scores = torch.zeros(len(outputs), width)
    for i, o in enumerate(outputs):
        responses[i, :len(o.response_ids)] = torch.tensor(o.response_ids)
        attention[i, :4 + len(o.response_ids)] = 1
        scores[i, len(o.response_ids) - 1] = o.reward_score
    batch = DataProto.from_dict(
        tensors={"prompts": torch.zeros(len(outputs), 4, dtype=torch.long), "responses": responses,
                 "attention_mask": attention, "rm_scores": scores},
        non_tensors={"uid": np.array(uids, dtype=object),
                     "rubricgym_env_id": np.array([o.extra_fields["rubricgym_env_id"] for o in outputs], dtype=object),
                     "rubricgym_episode": np.array([o.extra_fields["rubricgym_episode"] for o in outputs], dtype=object),
                     "rubricgym_messages": np.array([o.extra_fields["rubricgym_messages"] for o in outputs], dtype=object)})
    judge, backend = scripted_judge(lambda m, i: reply_scores(m))
    rv.rescore_batch(batch, scorers={"MathRuler-v0": RulerScorer(judge, combine="sum")})
    assert len(backend.requests) == 2 and all(len(trajectory_blocks(r)) == 2 for r in backend.requests)
    env_rewards = [o.reward_score for o in outputs]
    expected = [r + q for r, q in zip(env_rewards, (0.9, 0.3, 0.9, 0.3))]
    assert batch.batch["rm_scores"].sum(dim=1).tolist() == pytest.approx(expected)
    for i, o in enumerate(outputs):  # the reward sits on the last response token, as verl expects
        assert batch.batch["rm_scores"][i, len(o.response_ids) - 1] == pytest.approx(expected[i])
    assert not batch.non_tensor_batch["judge_failed"].any()


def test_the_example_registers_this_agent_loop_and_manager():
    from pathlib import Path

    from hydra.utils import get_class

    entries = OmegaConf.load(Path(__file__).resolve().parents[1] / "examples" / "verl" / "agent_loops.yaml")
    assert [(e.name, get_class(e._target_)) for e in entries] == [("rubricgym_env", rv.RubricgymAgentLoop)]
    script = (Path(__file__).resolve().parents[1] / "examples" / "verl" / "run_math_ruler_1gpu.sh").read_text()
    manager = script.split("agent_loop_manager_class=")[1].split()[0]
    assert get_class(manager) is rv.GroupJudgedAgentLoopManager
    assert issubclass(rv.GroupJudgedAgentLoopManager, __import__("verl").experimental.agent_loop.AgentLoopManager)
