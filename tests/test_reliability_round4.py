"""Reliability, round four (issue #53): bounded grader memory, the group env's last crash class,
options and seeds checked where they are given."""

import gymnasium as gym
import numpy as np
import pytest

import rubricgym  # noqa: F401
from rubricgym.chatenv import ChatEnv, Score


def test_long_distinct_answers_never_fill_the_verdict_cache():
    from rubricgym.envs.math import grader

    grader.VERDICTS.clear()
    for i in range(150):  # what a hostile client sent: 150 distinct 200k-character answers
        assert grader.answer_verdict("4", f"{i}" + "x" * 200_000) is False
    assert grader.VERDICTS.chars == 0
    for i in range(2_000):  # short ones are kept, within the cache's character budget
        grader.answer_verdict("4", str(i))
    assert 0 < grader.VERDICTS.chars <= grader.VERDICT_CACHE_CHARS
    assert grader.answer_verdict("4", "4") is True  # and still right


def test_the_verdict_cache_evicts_by_characters_not_entries():
    from rubricgym.envs.math.grader import MAX_ANSWER_CHARS, VerdictCache

    cache = VerdictCache(max_chars=10 * MAX_ANSWER_CHARS)
    for i in range(100):
        cache.put(("1", f"{i:04d}" + "y" * (MAX_ANSWER_CHARS - 5), 3.0), False)
    assert cache.chars <= 10 * MAX_ANSWER_CHARS and len(cache._entries) == 10
    assert cache.get(("1", "0099" + "y" * (MAX_ANSWER_CHARS - 5), 3.0)) is False  # the newest stay
    assert cache.get(("1", "0000" + "y" * (MAX_ANSWER_CHARS - 5), 3.0)) is None


@pytest.mark.parametrize("action", [{1: 2}, {None: "x", "name": "calculator"}, {(1, 2): [3]}])
def test_a_dict_action_with_non_string_keys_is_a_malformed_action_not_a_crash(action):
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    envs.reset(seed=0)
    obs, rewards, terminated, truncated, info = envs.step([action, "\\boxed{1}"])
    assert np.isfinite(rewards).all()
    record = envs.unwrapped.group_trajectories(0).trajectories[0]
    assert all(isinstance(k, str) for k in record.transitions[0].action)
    record.model_dump_json()  # the record still serialises


@pytest.mark.parametrize("options", ["x", [1], 5])
def test_reset_options_that_are_not_a_dict_are_refused_clearly(options):
    env = gym.make("Math-v0")
    with pytest.raises(ValueError, match="options must be a dict"):
        env.reset(options=options)
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    with pytest.raises(ValueError, match="options must be a dict"):
        envs.reset(options=options)


@pytest.mark.parametrize("kwargs, knob", [({"num_envs": 0}, "num_envs"), ({"num_envs": -2}, "num_envs"),
                                          ({"num_envs": 2, "group_size": 0}, "group_size"),
                                          ({"num_envs": "2"}, "num_envs"), ({"num_envs": 2, "group_size": 1.5}, "group_size")])
def test_group_env_sizes_are_checked_when_it_is_made(kwargs, knob):
    with pytest.raises(ValueError, match=knob):
        gym.make_vec("Math-v0", **kwargs)


@pytest.mark.parametrize("reset_kwargs, words", [({"seed": [1]}, "one int"), ({"seed": "3"}, "seed must be"),
                                                 ({"seed": 1.5}, "seed must be"), ({"options": {"task_ids": 5}}, "task_ids"),
                                                 ({"options": {"task_ids": "ab"}}, "task_ids")])
def test_group_env_seeds_and_task_ids_are_checked_at_reset(reset_kwargs, words):
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    with pytest.raises(ValueError, match=words):
        envs.reset(**reset_kwargs)
    envs.reset(seed=[4, 5])  # one per sub-env is fine
    envs.reset(seed=np.int64(4))


def test_the_autoreset_step_reports_its_members_inactive():
    envs = gym.make_vec("Math-v0", num_envs=2, group_size=2)
    envs.reset(seed=0)
    envs.step(["\\boxed{1}", "\\boxed{2}"])  # single-turn: the group ends
    _, rewards, _, _, info = envs.step(["ignored", "ignored"])  # NEXT_STEP autoreset: actions not applied
    assert not info["active"].any() and (rewards == 0).all()


def test_a_broken_plugin_warns_and_is_skipped(tmp_path, monkeypatch):
    """Another package's entry point that fails to import, or whose register() raises, never breaks rubricgym."""
    import sys

    from rubricgym.registration import ENVS, register_envs

    dist = tmp_path / "broken_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rubricgym.envs]\nmissing = no_such_module_anywhere:register\n"
                                           "raising = broken_plugin_mod:register\n[rubricgym.schemes]\nbad = no_such_module_anywhere:X\n")
    (tmp_path / "broken_plugin_mod.py").write_text("def register():\n    raise RuntimeError('plugin bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(ENVS)
    with pytest.warns(RuntimeWarning) as caught:
        register_envs()
    text = " ".join(str(w.message) for w in caught)
    assert "no_such_module_anywhere" in text and "plugin bug" in text and "'bad'" in text
    assert ENVS == before  # every real family still registered, nothing half-registered
    sys.modules.pop("broken_plugin_mod", None)


@pytest.mark.parametrize("env_id, knobs, named", [
    ("Math-v0", {"incorrect_reward": float("nan")}, "incorrect_reward"),
    ("Math-v0", {"format_weight": float("inf")}, "format_weight"),
    ("RagSupport-v0", {"weights": {"f1": float("inf")}}, "weights"),
    ("Math-v0", {"levels": ["a"]}, "levels"),
    ("ToolUse-v0", {"max_turns": "5"}, "max_turns"),
    ("WordSort-v0", {"num_tasks": 2.5}, "num_tasks"),
    ("OpenEnv-v0", {"system_prompt": 5, "url": "http://127.0.0.1:9"}, "system_prompt"),
])
def test_a_knob_of_the_wrong_type_or_not_finite_is_refused_at_make(env_id, knobs, named):
    """Checked where the config is made, naming the knob and what it takes, never steps later."""
    with pytest.raises(ValueError, match=rf"\.{named} must be"):
        gym.make(env_id, **knobs)


def test_a_config_object_of_another_class_is_refused():
    from rubricgym.envs.tools.tool_use import ToolUseConfig

    with pytest.raises(TypeError, match="config must be a MathEnvConfig"):
        gym.make("Math-v0", config=ToolUseConfig())


def test_served_tooluse_http_reset_works_and_a_stateless_step_gets_a_typed_error():
    import glob
    import os
    import tempfile

    import httpx

    from rubricgym.openenv.server import make_app, serve_in_thread

    pattern = os.path.join(tempfile.gettempdir(), "rubricgym-tooluse-*")
    before = set(glob.glob(pattern))
    with serve_in_thread(make_app("ToolUse-v0", max_sessions=2)) as url:
        for seed in range(3):  # each builds, resets and closes an env in the server's threads
            reply = httpx.post(f"{url}/reset", json={"seed": seed}, timeout=60)
            assert reply.status_code == 200 and reply.json()["observation"]["metadata"]["task_id"].startswith("shop-")
        step = httpx.post(f"{url}/step", json={"action": {"content": "hello"}}, timeout=60)
        assert step.status_code == 409 and step.json()["error"]["type"] == "RESET_NEEDED"
    assert set(glob.glob(pattern)) - before == set()  # no folder left behind


def test_a_lone_surrogate_is_refused_before_it_is_applied():
    import json

    env = gym.make("Math-v0", levels=(1,))
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("\\boxed{2} \ud800")
    assert "lone surrogate (U+D800)" in info["error"] and terminated
    json.dumps(obs, ensure_ascii=False).encode("utf-8")  # the transcript stays representable
    env.reset(seed=0)
    _, _, _, _, info = env.step({"role": "assistant", "content": "x",
                                 "tool_calls": [{"function": {"name": "calculator", "arguments": "\udfff"}}]})
    assert "tool_calls have a lone surrogate" in info["error"]


@pytest.mark.parametrize("env_id,kwargs,error", [
    ("WordSort-v0", {"num_tasks": 10**9}, "WordSortConfig.num_tasks must be between 1 and 100,000"),
    ("ToolUse-v0", {"num_tasks": 0}, "ToolUseConfig.num_tasks must be between 1 and 100,000"),
    ("Math-v0", {"max_turns": 0}, "MathEnvConfig.max_turns must be between 1 and 1,000"),
    ("RagSupport-v0", {"max_action_chars": -5}, "RagSupportConfig.max_action_chars must be between 1 and"),
    ("MathRuler-v0", {"judge": "oracle:1.0", "permutations": 10**6}, "RulerConfig.permutations must be between 1 and 64"),
    ("MathRubric-v0", {"verifier": "oracle:1.0", "rubricator_user": 5}, "RubricConfig.rubricator_user must be a string"),
    ("MathRuler-v0", {"judge": "oracle:1.0", "history_size": "5"}, "history_size must be an integer between 0 and 1,000"),
    ("MathRuler-v0", {"judge": 5}, "a judge is a model string"),
    ("MathRubric-v0", {"verifier": 5}, "a judge is a model string"),
])
def test_sizes_and_scheme_knobs_are_refused_where_the_config_is_made(env_id, kwargs, error):
    with pytest.raises(ValueError, match=error):
        env = gym.make(env_id, **kwargs)
        env.reset(seed=0)  # a scorer built lazily is built by now
        env.step("\\boxed{1}")


class _MisbehavingServerFamily(ChatEnv):
    """A served family that answers "slow" after 3 s and "inf" with an infinite reward."""

    def setup(self):
        return ["a", "b"]

    def task_id(self, task):
        return task

    def first_messages(self, task, options):
        return [{"role": "system", "content": "Say anything."}, {"role": "user", "content": task}]

    def score(self, final):
        import time

        text = final.content if final is not None else ""
        if text == "slow":
            time.sleep(3)
        return Score(reward=float("inf") if text == "inf" else 1.0, components={"outcome": 1.0}, correct=True)


def test_openenv_client_holds_one_deadline_per_call_and_refuses_what_it_cannot_pass_on():
    from rubricgym.openenv.server import make_app, serve_in_thread
    from rubricgym.testing.contract import registered

    with registered("Misbehaving", _MisbehavingServerFamily):
        with serve_in_thread(make_app("Misbehaving-v0")) as url:
            env = gym.make("OpenEnv-v0", url=url, message_timeout_s=1.0)
            env.reset(seed=0)
            _, reward, terminated, truncated, info = env.step("slow")
            # the call and its one replay each stop at the deadline: an episode ended, truncated, with the reason
            assert (reward, terminated, truncated) == (0.0, False, True) and "did not answer step within 1 s" in info["error"]
            env.reset(seed=0)
            _, reward, _, truncated, info = env.step("inf")
            assert truncated and reward == 0.0 and "broke the protocol" in info["error"] and np.isfinite(reward)
            env.reset(seed=0)
            _, reward, terminated, _, info = env.step("fine")  # the env goes on working
            assert (reward, terminated) == (1.0, True) and "error" not in info
            env.close()


def test_a_dict_action_nested_without_end_is_recorded_not_a_crash():
    # found by benchmarks/fuzz.py --smoke: the recorder followed a hostile dict action to Python's
    # recursion limit (RecursionError out of step) in the group env
    deep: dict = {"role": "assistant", "content": "x"}
    node = deep
    for _ in range(5_000):
        node["tool_calls"] = [{"function": {}}]
        node = node["tool_calls"][0]["function"]
    loop: dict = {"role": "assistant", "content": "y"}
    loop["extra"] = loop
    envs = gym.make_vec("WordSort-v0", num_envs=2, group_size=2)
    envs.reset(seed=0)
    _, rewards, terminated, _, info = envs.step([deep, loop])
    assert terminated.all() and np.isfinite(rewards).all()
    assert all(t.transitions[0].action for t in info["trajectory"])


@pytest.mark.parametrize("env_id", ["WordSort-v0", "ToolUse-v0", "MathRandom-v0", "RagSupport-v0"])
def test_a_lone_surrogate_written_as_a_json_escape_in_a_call_is_refused_not_a_crash(env_id):
    """``"\\ud800\\ud800"`` in a call's JSON is ASCII in the reply but decodes to lone surrogates: the
    content-derived call id hashed them and raised UnicodeEncodeError out of step (found by
    benchmarks/fuzz.py in 14 ids). Now the call is refused before it is applied, with the reason."""
    import json

    import gymnasium as gym

    from rubricgym.tools import parse_action

    call = '<tool_call>{"name": "get_order", "arguments": {"order_id": 1, "reason": "\\ud800\\ud800"}}</tool_call>'
    parsed = parse_action(call)
    assert not parsed.tool_calls and "lone surrogate (U+D800)" in parsed.errors[0]
    assert parse_action(call.replace("\\ud800\\ud800", "\\ud800\\udc00")).tool_calls  # a valid pair is one character
    env = gym.make(env_id)
    env.reset(seed=1)
    obs, reward, terminated, truncated, info = env.step(call)
    json.dumps(obs, ensure_ascii=False).encode("utf-8")  # the transcript stays representable
    assert isinstance(reward, float)
