"""Hostile input to Math-v0.step: no crash, no step slower than 5 s, clear errors for wrong types."""

import json
import time

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rubricgym  # noqa: F401

ENVS = {
    "plain": gym.make("Math-v0", disable_env_checker=True),
    "tools": gym.make("Math-v0", tools=["calculator"], max_turns=3, disable_env_checker=True),
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)

malformed_calls = st.one_of(
    st.text(max_size=60).map(lambda s: f"<tool_call>{s}</tool_call>"),
    json_values.map(lambda v: f"<tool_call>{json.dumps(v)}</tool_call>"),
    st.builds(lambda name, args: f'<tool_call>{{"name": {json.dumps(name)}, "arguments": {json.dumps(args)}}}</tool_call>',
              st.text(max_size=15) | st.sampled_from(["calculator", "Calculator", ""]), json_values),
    st.text(max_size=40).map(lambda s: f'<tool_call>{{"name": "calculator", "arguments": {{"expression": {json.dumps(s)}}}}}'),
    st.builds(lambda raw: {"role": "assistant", "content": None, "tool_calls": raw},
              st.lists(json_values, max_size=3) | json_values),
)

nested_braces = st.integers(1, 3000).map(lambda n: "\\boxed{" * n + "1" + "}" * (n // 2))
huge_strings = st.sampled_from([
    "9" * 1_000_000, "\\boxed{" + "9" * 150_000 + "}", "{" * 100_000, "\\boxed{9^{9^{9^{9^{9}}}}}",
    "\\boxed{" + "\\frac{1}{" * 400 + "2" + "}" * 400 + "}", "<tool_call>" * 20_000,
])
wrong_types = st.one_of(
    st.integers(), st.floats(), st.none(), st.binary(max_size=10), st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.tuples(st.text(max_size=3)),
)
actions = st.one_of(st.text(), nested_braces, huge_strings, malformed_calls, wrong_types)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(action=actions, which=st.sampled_from(sorted(ENVS)), seed=st.integers(0, 10_000))
def test_step_survives_anything(action, which, seed):
    env = ENVS[which]
    env.reset(seed=seed)
    start = time.perf_counter()
    obs, reward, terminated, truncated, info = env.step(action)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"step took {elapsed:.2f}s"
    assert env.observation_space.contains(obs)
    assert isinstance(reward, float)
    assert isinstance(info["reward_components"], dict)
    if not isinstance(action, (str, dict)):
        assert f"got {type(action).__name__}" in info["error"]
        assert obs[-1]["content"].startswith("Error:")
