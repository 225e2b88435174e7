"""Rollouts sampled by an OpenAI-compatible server (agents/generation.py): adapter reloads after
every update, token ids and log-probs reaching the trainer, drift check, dead servers."""

import math

import pytest
from conftest import require

require("peft", "agents")
pytest.importorskip("httpx")


def _config(tmp_path, url, model, steps=2, **kw):
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig

    return TrainConfig(env="Math-v0", env_kwargs={"levels": (1,)}, steps=steps, group_size=2, groups_per_step=1,
                       eval_tasks=0, checkpoint_every=0, record_groups=0, report_to=(), show_completions=0,
                       output_dir=str(tmp_path / "run"), rollout_server=url,
                       policy=PolicyConfig(model=model, max_new_tokens=8, cpu_threads="fixed"), **kw)


def test_training_through_a_vllm_api_server_reloads_the_adapter_after_every_update(tmp_path, tiny_model_path):
    from vllm_double import VLLMDouble

    from rubricgym.agents.train import Trainer

    double = VLLMDouble(model=tiny_model_path)
    try:
        trainer = Trainer(_config(tmp_path, double.base, tiny_model_path, steps=2))
        history = [trainer.train_step() for _ in range(2)]
        paths = double.server.paths()
        loads = [body for path, body, _ in double.server.requests if path.endswith("/load_lora_adapter")]
        # the initial weights, then one load after each of the 2 updates; old adapters unloaded
        assert [b["lora_name"] for b in loads] == ["rubricgym-step0", "rubricgym-step1", "rubricgym-step2"]
        assert sum(p.endswith("/unload_lora_adapter") for p in paths) == 2
        # every completion request after a load names the adapter loaded last
        assert double.served_models == ["rubricgym-step0", "rubricgym-step1"]
        # the server's token ids are what the trainer trained on
        trained = [t.sample.completion_ids for t in trainer.last_batch.turns]
        assert all(ids in double.returned_ids for ids in trained)
        assert all(t.sample.meta["logprobs_from"] == "server" for t in trainer.last_batch.turns)
        for stats in history:
            assert stats["adapter_reload_seconds"] > 0
            if stats["trained_completions"]:  # the drift check: the double samples from the same weights
                assert abs(stats["rollout_ratio_mean"] - 1.0) < 1e-2 and stats["rollout_logprob_abs_diff"] < 1e-2
        assert math.isfinite(history[-1]["loss"])
    finally:
        double.close()


def test_a_server_that_fails_then_recovers_costs_a_retry_not_the_step(tmp_path, tiny_model_path):
    from vllm_double import VLLMDouble

    from rubricgym.agents.generation import ServerConfig, ServerGenerator
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.train import Trainer

    double = VLLMDouble(fail_first=5, model=tiny_model_path)  # 503 five times: more than one call's retries (3 + 1), less than the step's
    try:
        generator = ServerGenerator(ServerConfig(url=double.base, backoff_s=0.01, max_retries=3))
        config = _config(tmp_path, double.base, tiny_model_path, steps=1)
        trainer = Trainer(config, policy=Policy(config.policy, generator=generator))
        stats = trainer.train_step()
        assert trainer.step == 1 and double.completion_calls == 6 and stats["groups"] == 1
    finally:
        double.close()


def test_a_dead_server_is_a_clear_error_and_the_run_stays_at_its_step(tmp_path, tiny_model_path):
    from rubricgym.agents.generation import RolloutServerError, ServerConfig, ServerGenerator
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.testing.loopback import LoopbackServer

    server = LoopbackServer()
    url = server.base
    server.close()  # nothing listens there any more
    from rubricgym.agents.train import Trainer

    config = _config(tmp_path, url, tiny_model_path, steps=1, rollout_retries=1)
    generator = ServerGenerator(ServerConfig(url=url, backoff_s=0.01, max_retries=1, timeout_s=5))
    trainer = Trainer(config, policy=Policy(config.policy, generator=generator))
    with pytest.raises(RolloutServerError, match=r"step 0 not trained .*failed 2 times.*ConnectError"):
        trainer.train_step()
    assert trainer.step == 0


def test_a_refused_request_is_not_retried(tmp_path, tiny_model_path):
    from rubricgym.agents.generation import RolloutServerError, ServerConfig, ServerGenerator
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.testing.loopback import LoopbackServer, Reply

    with LoopbackServer(completions=lambda body: Reply(400, {"error": {"message": "prompt too long"}})) as server:
        policy = Policy(PolicyConfig(model=tiny_model_path, max_new_tokens=4), generator=ServerGenerator(ServerConfig(url=server.base, model="m")))
        with pytest.raises(RolloutServerError, match="was refused: HTTP 400.*prompt too long"):
            policy.sample([[{"role": "user", "content": "1+1?"}]])
        assert server.paths().count("/v1/completions") == 1


@pytest.mark.server
def test_generation_through_llama_cpp(llama_server, tiny_model_path):
    """A real OpenAI-compatible server (llama.cpp, the default model's GGUF) samples the rollouts of
    a Math-v0 group through the plain-server API: text prompts, replies re-encoded, log-probs. The
    policy in process only needs the tokenizer here: the tiny model has the default one."""
    from rubricgym.agents.evaluation import make_envs
    from rubricgym.agents.generation import ServerConfig, ServerGenerator
    from rubricgym.agents.policy import Policy, PolicyConfig
    from rubricgym.agents.rollout import collect_rollouts

    generator = ServerGenerator(ServerConfig(url=llama_server, api="openai", timeout_s=120))
    policy = Policy(PolicyConfig(model=tiny_model_path, max_new_tokens=24), generator=generator)
    envs = make_envs("Math-v0", num_envs=2, group_size=2, kwargs={"levels": (1,)})
    batch = collect_rollouts(envs, policy, seed=3)
    envs.close()
    assert len(batch.turns) == 2 and all(t.sample.text.strip() for t in batch.turns)
    for turn in batch.turns:
        sample = turn.sample
        assert sample.completion_ids and len(sample.logprobs) == len(sample.completion_ids)
        assert policy.tokenizer.decode(sample.completion_ids, skip_special_tokens=True).strip() == sample.text.strip()
        assert len(sample.completion_ids) <= 24 + 1
    assert generator.sync(policy, 1) == {}  # a plain server never reloads weights
