"""Served envs (#24): rubricgym ids over the real OpenEnv server and client, OpenEnv-v0 on our own
servers and on the `openenv` package's own example env (its `openenv init` echo template), RULER
over that foreign env, `rubricgym serve` as a command, hostile clients and a server restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest

from conftest import require

require("openenv", "openenv")

import rubricgym  # noqa: E402,F401
from rubricgym.openenv.server import make_app, serve_in_thread  # noqa: E402
from rubricgym.testing.contract import play, script  # noqa: E402
from rubricgym.testing.loopback import free_port, server_process  # noqa: E402

from judges import scripted_judge  # noqa: E402

#: the `openenv` command of this environment
OPENENV_CLI = os.path.join(os.path.dirname(sys.executable), "openenv")
# every family's served round trip with its training knobs is a family-contract check
# (tests/test_family_contract.py); here the knobs that make two single-turn families multi-turn
MULTI_TURN = {"Math-v0": {"levels": (1,), "tools": ["calculator"]}, "RagSupport-v0": {"mode": "agentic"}}


@pytest.mark.parametrize("env_id", list(MULTI_TURN))
def test_multi_turn_settings_served_play_as_in_process(env_id, shared_data):
    kwargs = MULTI_TURN[env_id]
    local = gym.make(env_id, **kwargs)
    with serve_in_thread(make_app(env_id, max_sessions=4, **kwargs)) as url:
        served = gym.make("OpenEnv-v0", url=url)
        assert served.unwrapped.chat_server and served.unwrapped.action_field == "content"
        actions = script(local)
        for seed in (0, 1, 2):
            assert play(served, seed, actions) == play(local, seed, actions), (env_id, seed)
        served.close()


def test_a_judged_id_served_scores_as_in_process():
    kwargs = {"judge": "oracle:0.8", "levels": (1,)}  # a noisy simulated judge: same seed, same verdicts
    local = gym.make("MathRuler-v0", **kwargs)
    with serve_in_thread(make_app("MathRuler-v0", **kwargs)) as url:
        served = gym.make("OpenEnv-v0", url=url)
        for seed in range(4):  # one session: the judge's history of the task carries over, as in-process
            answer = rubricgym_gold(local, seed)
            actions = [f"\\boxed{{{answer if seed % 2 else 0}}}"]
            local_steps, served_steps = play(local, seed, actions), play(served, seed, actions)
            assert served_steps == local_steps
            assert "ruler" in served_steps[1][3]
        served.close()


def rubricgym_gold(env, seed: int) -> str:
    from judges import gold

    _, info = env.reset(seed=seed)
    return gold(info["task_id"])


def test_openenv_env_passes_check_env_on_our_server():
    from gymnasium.utils.env_checker import check_env

    with serve_in_thread(make_app("WordSort-v0")) as url:
        env = gym.make("OpenEnv-v0", url=url).unwrapped
        check_env(env, skip_render_check=True)
        env.close()


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory):
    """The `openenv` package's own example env (`openenv init` writes its echo template), served by
    uvicorn as its README says; the template allows one session, raised to 8 as its comment invites."""
    folder = tmp_path_factory.mktemp("openenv-example")
    subprocess.run([OPENENV_CLI, "init", "echo_env", "--output-dir", str(folder)], check=True, capture_output=True, timeout=120)
    env_dir = folder / "echo_env"
    app_file = env_dir / "server" / "app.py"
    app_file.write_text(app_file.read_text().replace("max_concurrent_envs=1,", "max_concurrent_envs=8,"))
    port = free_port()
    with server_process([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port)],
                        f"http://127.0.0.1:{port}/health", cwd=str(env_dir)):
        yield f"http://127.0.0.1:{port}"


def test_openenv_env_drives_a_foreign_example_env(echo_server):
    from gymnasium.utils.env_checker import check_env

    env = gym.make("OpenEnv-v0", url=echo_server, system_prompt="Repeat the user's words.", max_turns=2).unwrapped
    assert not env.chat_server and env.action_field == "message"  # read from the server's action schema
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=5)
    assert obs[0] == {"role": "system", "content": "Repeat the user's words."} and info["task_id"] == "seed:5"
    obs, reward, terminated, truncated, info = env.step("hello")  # the echo env rewards 0.1 a character
    assert (reward, terminated, truncated) == (pytest.approx(0.5), False, False)
    assert obs[-1]["content"] == "echoed_message: hello\nmessage_length: 5"  # the observation's fields, rendered
    obs, reward, terminated, truncated, info = env.step({"not": "text"})  # refused here, costs the last turn
    assert terminated and "must be a reply string" in info["error"] and info["episode"].answer is None
    assert env.step("again")[4]["episode_ended"]
    env.close()


def test_ruler_ranks_sessions_of_a_foreign_env(echo_server):
    judge, backend = scripted_judge()
    envs = gym.make_vec("OpenEnvRuler-v0", num_envs=4, group_size=2, url=echo_server, max_turns=1,
                        system_prompt="Greet the user; quality=<x> marks how well.", judge=judge)
    obs, info = envs.reset(seed=3)
    assert info["task_id"][0] == info["task_id"][1] and info["task_id"][0].startswith("seed:")
    _, rewards, terminated, truncated, info = envs.step(["quality=0.9 hi", "quality=0.1 hello", "quality=0.4 hey", "quality=0.6 yo"])
    assert truncated.all() and len(backend.requests) == 2  # one judge call per group
    assert list(info["reward_components"]["ruler"]) == pytest.approx([0.9, 0.1, 0.4, 0.6])
    env_rewards = [min(len(a) * 0.1, 1.0) for a in ["quality=0.9 hi", "quality=0.1 hello", "quality=0.4 hey", "quality=0.6 yo"]]
    assert list(rewards) == pytest.approx([e + s for e, s in zip(env_rewards, [0.9, 0.1, 0.4, 0.6])])
    envs.close()


@pytest.mark.slow
def test_rubricgym_serve_command_and_hostile_clients(tmp_path):
    import websockets.sync.client as ws_client
    from websockets.exceptions import ConnectionClosed

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with server_process([sys.executable, "-m", "rubricgym", "serve", "WordSort-v0", "--port", str(port), "--max-sessions", "8",
                         "--max-message-mb", "1"], url + "/health") as process:
        report = subprocess.run([OPENENV_CLI, "validate", "--url", url], capture_output=True, text=True, timeout=300)
        assert "Verdict: PASS" in report.stdout, report.stdout + report.stderr  # OpenEnv's own conformance checks
        local, served = gym.make("WordSort-v0"), gym.make("OpenEnv-v0", url=url)
        assert play(served, 7, ["zebra"]) == play(local, 7, ["zebra"])
        # hostile clients: bad JSON, unknown types, a bad action, an oversized message, vanishing mid-episode
        replies = []
        with ws_client.connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as socket:
            for raw in ["{not json", json.dumps({"type": "fly"}), json.dumps({"type": "step", "data": {"content": 5}}),
                        json.dumps({"type": "reset", "data": {"seed": -1}})]:
                socket.send(raw)
                replies.append(json.loads(socket.recv(timeout=30)))
        assert [r["type"] for r in replies] == ["error"] * 4 and replies[0]["data"]["code"] == "INVALID_JSON"
        with ws_client.connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as socket:  # over --max-message-mb
            socket.send(json.dumps({"type": "step", "data": {"content": "x" * 2_000_000}}))
            assert json.loads(socket.recv(timeout=30))["data"]["code"] == "ACTION_TOO_LARGE"
            with pytest.raises(ConnectionClosed) as closed:
                socket.recv(timeout=30)
            assert closed.value.rcvd.code == 1009
        for _ in range(20):  # sessions opened and abandoned mid-episode
            with ws_client.connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10) as socket:
                socket.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                socket.recv(timeout=30)
        assert play(served, 8, ["zebra"]) == play(local, 8, ["zebra"])  # the server still serves
        assert process.poll() is None
        served.close()


def test_a_server_restart_mid_episode_replays_the_episode():
    from rubricgym.openenv.server import serve_in_thread as serve

    kwargs = {"levels": (1,), "tools": ["calculator"]}
    local = gym.make("Math-v0", **kwargs)
    app = make_app("Math-v0", **kwargs)
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>'
    port = free_port()
    with serve(app, port=port) as url:
        served = gym.make("OpenEnv-v0", url=url)
        served.reset(seed=4)
        served.step(call)
    with serve(make_app("Math-v0", **kwargs), port=port):  # the same address, a fresh server
        obs, reward, terminated, truncated, info = served.step("\\boxed{42}")
    assert info["replayed"] and terminated
    local.reset(seed=4)
    local.step(call)
    assert (reward, [m["content"] for m in obs]) == (local.step("\\boxed{42}")[1], [m["content"] for m in local.unwrapped.messages])
    with serve(make_app("Math-v0", **kwargs), port=port):
        served.reset(seed=4)
    served.unwrapped.config.connect_timeout_s = 2  # the server is gone now: the episode in flight ends truncated
    obs, reward, terminated, truncated, info = served.step(call)
    assert truncated and reward == 0 and "went away mid-episode" in info["error"] and info["episode"].truncated
    with pytest.raises(ConnectionError):
        served.reset(seed=4)
    served.close()


def test_the_container_manifest_passes_openenv_validation():
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "deploy" / "openenv"
    report = subprocess.run([OPENENV_CLI, "validate", str(folder), "--level", "static"], capture_output=True, text=True, timeout=300)
    assert "Verdict: PASS" in report.stdout, report.stdout + report.stderr
    assert "rubricgym.openenv.server import app_from_environ" in (folder / "server" / "app.py").read_text()


def test_sessions_spread_over_several_servers():
    with serve_in_thread(make_app("WordSort-v0")) as first, serve_in_thread(make_app("WordSort-v0")) as second:
        envs = gym.make_vec("OpenEnv-v0", num_envs=4, group_size=2, url=f"{first},{second}")
        assert [env.unwrapped.url for env in envs.envs] == [first, second, first, second]  # in turn
        obs, info = envs.reset(seed=0)
        assert info["task_id"][0] == info["task_id"][1] and info["task_id"][2] == info["task_id"][3]
        assert obs[0] == obs[1]  # a group's members play one scenario, each on its own server
        _, rewards, terminated, _, info = envs.step(["zebra"] * 4)
        assert terminated.all() and len(info["trajectory"]) == 4
        envs.close()


def test_served_variant_plays_a_runs_episodes_on_its_servers_and_refuses_the_wrong_ones():
    """`env_servers` (train / bench / EnvRollout): the run's id becomes OpenEnv-v0 with its scheme on
    the servers, family knobs left to them; a server of another env, a scheme that needs its family
    in process, or a dead server is refused before any model work."""
    from rubricgym.openenv.client import served_variant

    with serve_in_thread(make_app("Math-v0", levels=(1,))) as first, serve_in_thread(make_app("Math-v0", levels=(1,))) as second, \
            serve_in_thread(make_app("WordSort-v0")) as other:
        servers = f"{first}/, {second}"
        assert served_variant("MathRuler-v0", {"levels": (1,), "judge": "oracle:1.0"}, servers) == (
            "OpenEnvRuler-v0", {"url": f"{first},{second}", "judge": "oracle:1.0"})
        assert served_variant("Math-v0", {"levels": (1,)}, first) == ("OpenEnv-v0", {"url": first})
        with pytest.raises(ValueError, match=f"the server at {other} serves 'WordSort-v0', not 'Math-v0'"):
            served_variant("MathRuler-v0", {}, f"{first},{other}")
        with pytest.raises(ValueError, match="needs its family in this process"):
            served_variant("MathRubric-v0", {}, first)
        with pytest.raises(ValueError, match="env_servers is empty"):
            served_variant("Math-v0", {}, " , ")
    with pytest.raises(ConnectionError, match="cannot read the OpenEnv metadata"):
        served_variant("Math-v0", {}, first, timeout_s=2)


def test_our_trainer_and_trls_rollout_play_on_two_servers(tmp_path, tiny_model_path):
    """`--env-servers`: our GRPO step and TRL's GRPOTrainer (EnvRollout) play every group on the
    servers, members spread over both, RULER (oracle) scoring each group whole here (the tiny
    model plays: this checks where episodes run, not what they learn)."""
    trl = require("trl", "trl")
    from peft import LoraConfig

    from rubricgym.agents.train import TrainConfig, Trainer
    from rubricgym.app.cli import main
    from rubricgym.integrations.trl import EnvRollout, EnvRolloutConfig, env_reward
    from rubricgym.models import load_model_and_tokenizer

    with serve_in_thread(make_app("Math-v0", levels=(1,))) as first, serve_in_thread(make_app("Math-v0", levels=(1,))) as second:
        config = TrainConfig(env="MathRuler-v0", env_kwargs={"judge": "oracle:1.0"}, env_servers=f"{first},{second}", steps=1,
                             group_size=2, groups_per_step=2, eval_tasks=2, output_dir=str(tmp_path / "ours"), report_to=("none",))
        config.policy.max_new_tokens, config.policy.model = 8, tiny_model_path
        trainer = Trainer(config)
        assert [env.unwrapped.url for env in trainer.envs.unwrapped.envs] == [first, second, first, second]
        stats = trainer.train_step()
        assert stats["judge_failed_groups"] == 0
        assert all("ruler" in t.reward_components for group in trainer.last_batch.groups for t in group.trajectories)
        trainer.envs.close()
        assert main(["train", "--env", "Math-v0", "--env-servers", first, "--steps", "1", "--group-size", "2",
                     "--groups-per-step", "1", "--eval-tasks", "2", "--max-new-tokens", "8",
                     "--model", tiny_model_path, "--output-dir", str(tmp_path / "cli")]) == 0

        rollout = EnvRollout(config=EnvRolloutConfig(env_id="MathRuler-v0", env_kwargs={"levels": (1,), "judge": "oracle:1.0"},
                                                     env_servers=f"{first},{second}"))
        assert rollout.rollout_env == ("OpenEnvRuler-v0", {"url": f"{first},{second}", "judge": "oracle:1.0"})
        model, tokenizer = load_model_and_tokenizer(tiny_model_path)
        args = trl.GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=2,
                              max_completion_length=16, max_steps=2, learning_rate=1e-4, logging_steps=1, report_to="none",
                              use_cpu=True, bf16=False, save_strategy="no", seed=0)
        grpo = trl.GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward, train_dataset=rollout.dataset(8),
                               rollout_func=rollout, args=args,
                               peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
        grpo.train()
        assert rollout.groups_played == 4
        urls = {env.unwrapped.url for envs in rollout._envs.values() for env in envs.unwrapped.envs}
        assert urls == {first, second}
        logged = [row for row in grpo.state.log_history if "loss" in row]
        assert len(logged) == 2 and any("rubricgym/reward_components/ruler" in row for row in logged)


def test_a_seeded_session_names_its_episodes_the_same_way_twice():
    from rubricgym.openenv.server import RubricgymEnvironment

    first, second = RubricgymEnvironment("Math-v0"), RubricgymEnvironment("Math-v0")
    first.reset(seed=5)
    second.reset(seed=5)
    assert first.state.episode_id == second.state.episode_id
    first.reset()  # unseeded: the stream goes on, a new id
    assert first.state.episode_id != second.state.episode_id
    assert first.reset(seed=5) is not None and first.state.episode_id == second.state.episode_id
