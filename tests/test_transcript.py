"""A multi-turn episode's token transcript (what TRL and verl train on) matches what was sampled,
whatever the model wrote: the end-of-turn token the tokenizer does not call special, a tool call
written in another layout than the env's canonical one. Real tokenizer (the default model's), real
Math-v0 env with the calculator."""

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.integrations.transcript import TokenTranscript


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rubricgym.models import default_model_dir

    return AutoTokenizer.from_pretrained(default_model_dir())


def play(tokenizer, replies):
    """Feed ``replies`` (text, each sampled up to and including <|im_end|>) through the env as the
    rollout adapters do: the env gets the text without special tokens, the transcript the ids."""
    env = gym.make("Math-v0", levels=(3,), tools=["calculator"])
    obs, _ = env.reset(seed=0)
    transcript = TokenTranscript.start(tokenizer, obs)
    for reply in replies:
        ids = tokenizer.encode(reply + "<|im_end|>", add_special_tokens=False)
        transcript.add_model_turn(ids, [-0.5] * len(ids))
        next_obs, _, terminated, truncated, _ = env.step(tokenizer.decode(ids, skip_special_tokens=True))
        if terminated or truncated:
            break
        transcript.add_env_turn(obs, next_obs)
        obs = next_obs
    return transcript, obs


def test_three_turns_with_tool_calls_re_render_as_sampled(tokenizer):
    # a compact call (not the env's canonical layout), a malformed call, then an answer
    replies = ['Let me compute it.<tool_call>{"name":"calculator","arguments":{"expression":"62-60"}}</tool_call>',
               '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</',
               "The answer is \\boxed{2}."]
    transcript, obs = play(tokenizer, replies)
    assert transcript.turns == 3 and transcript.replies[0] == replies[0]
    # one <|im_end|> per turn (the model's, no second one from the template), and the ids are the text
    assert transcript.text.count("<|im_end|><|im_end|>") == 0
    assert tokenizer.decode(transcript.prompt_ids + transcript.completion_ids, skip_special_tokens=False) == transcript.text
    # every model token is marked 1 with its log-prob, every env token 0 with 0.0
    model_ids = [i for i, m in zip(transcript.completion_ids, transcript.env_mask) if m]
    assert model_ids == sum((tokenizer.encode(r + "<|im_end|>", add_special_tokens=False) for r in replies), [])
    assert all((lp == -0.5) == bool(m) for lp, m in zip(transcript.logprobs, transcript.env_mask))
    assert "Tool result (calculator): 2" in transcript.text and "not closed" in transcript.text
