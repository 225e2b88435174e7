"""The judge proxy (`rubricgym judge-proxy`): LiteLLM's own proxy, configured from the judge
settings, shared by several processes: one rate limit and one cache for all of them, against a
loopback provider. The proxy runs from its own virtualenv (`rubricgym judge-proxy --install`,
which `.ci/run` runs)."""

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from rubricgym.app.judge_proxy import ProxyConfig, litellm_command, proxy_command, proxy_config, write_proxy_config
from rubricgym.judges.base import run_sync
from rubricgym.llm import LLMCallError, LLMConfig, make_llm
from rubricgym.llm.client import PROXY_MODEL
from rubricgym.testing.loopback import LoopbackServer, free_port, server_process

KEY = "sk-rubricgym-test-proxy-key"
#: one "rank": a separate process judging through the proxy (no client cache, patient retries)
RANK = """
import asyncio, json, sys
from rubricgym.llm import LLMConfig, make_llm
url, prompts = sys.argv[1], json.loads(sys.argv[2])
llm = make_llm("proxy:" + url, config=LLMConfig(cache_dir=None, timeout_s=30, max_retries=40, backoff_initial_s=1,
                                                backoff_max_s=4, max_concurrency=8))
async def main():
    return await asyncio.gather(*(llm.complete([{"role": "user", "content": p}], None, max_tokens=8) for p in prompts))
print(json.dumps([c.text for c in asyncio.run(main())]))
"""


def test_proxy_config_from_the_judge_settings(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = proxy_config(ProxyConfig(model="openai/smollm2", api_base="http://127.0.0.1:9/v1", rpm=60, tpm=6000,
                                      fallbacks=("openai/backup",), redis_url="redis://:pw@10.0.0.5:6380"))
    judge, backup = config["model_list"]
    assert judge["model_name"] == PROXY_MODEL and backup["model_name"] == f"{PROXY_MODEL}-fallback-0"
    assert judge["litellm_params"] == {"model": "openai/smollm2", "api_key": "sk-local", "timeout": 120.0,
                                       "api_base": "http://127.0.0.1:9/v1", "rpm": 60, "tpm": 6000}
    assert config["litellm_settings"]["fallbacks"] == [{PROXY_MODEL: [f"{PROXY_MODEL}-fallback-0"]}]
    assert config["litellm_settings"]["cache_params"] == {"type": "redis", "ttl": 86400, "host": "10.0.0.5", "port": 6380,
                                                          "password": "pw"}
    assert config["router_settings"]["redis_host"] == "10.0.0.5" and config["router_settings"]["enable_pre_call_checks"]
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"  # never the key itself
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    plain = proxy_config(ProxyConfig(model="openai/gpt-4o-mini"))
    assert plain["model_list"][0]["litellm_params"]["api_key"] == "os.environ/OPENAI_API_KEY"  # read by the proxy
    assert "rpm" not in plain["model_list"][0]["litellm_params"] and "sk-secret" not in json.dumps(plain)
    for model, message in (("", "needs a judge model"), ("local", "serve a local judge"), ("oracle:0.9", "not 'oracle:0.9'")):
        with pytest.raises(ValueError, match=message):
            proxy_config(ProxyConfig(model=model))


def test_proxy_judge_strings(monkeypatch):
    monkeypatch.setenv("LITELLM_MASTER_KEY", KEY)
    llm = make_llm("proxy:http://127.0.0.1:4000/")
    assert llm.backend.model == f"openai/{PROXY_MODEL}" and llm.backend.api_base == "http://127.0.0.1:4000" and llm.backend.api_key == KEY
    with pytest.raises(ValueError, match="proxy:<http"):
        make_llm("proxy:127.0.0.1:4000")
    monkeypatch.delenv("LITELLM_MASTER_KEY")
    with pytest.raises(ValueError, match="set LITELLM_MASTER_KEY"):
        make_llm("proxy:http://127.0.0.1:4000")


def test_judge_proxy_cli_writes_the_config(tmp_path, capsys, monkeypatch):
    from rubricgym.app.cli import main

    monkeypatch.setenv("LITELLM_MASTER_KEY", "set here only so that teardown removes the key the command makes")
    monkeypatch.delenv("LITELLM_MASTER_KEY")
    out = tmp_path / "proxy.yaml"
    assert main(["judge-proxy", "--judge", "openai/gpt-4o-mini", "--rpm", "60", "--fallbacks", "openai/a,openai/b",
                 "--port", "4100", "--config-out", str(out), "--print-only"]) == 0
    printed = capsys.readouterr().out
    assert "--judge proxy:http://127.0.0.1:4100" in printed and "export LITELLM_MASTER_KEY=sk-" in printed
    config = json.loads(out.read_text())
    assert [m["litellm_params"]["model"] for m in config["model_list"]] == ["openai/gpt-4o-mini", "openai/a", "openai/b"]
    assert config["model_list"][0]["litellm_params"]["rpm"] == 60
    assert os.environ["LITELLM_MASTER_KEY"].startswith("sk-")  # made for the proxy it would start


@pytest.fixture(scope="module")
def provider():
    server = LoopbackServer(chat=lambda body: "verdict for " + body["messages"][-1]["content"])
    yield server
    server.close()


@pytest.fixture(scope="module")
def proxy(provider, tmp_path_factory):
    """LiteLLM's proxy at rpm=60 over the loopback provider, in its own process (as `rubricgym judge-proxy` runs it)."""
    try:
        executable = litellm_command()
    except FileNotFoundError as err:
        pytest.fail(f"{err} (CI installs it in .ci/run)")
    config = ProxyConfig(model="openai/loopback", api_base=provider.base, rpm=60, port=free_port())
    path = write_proxy_config(config, tmp_path_factory.mktemp("proxy") / "proxy.yaml")
    environ = {**os.environ, "LITELLM_MASTER_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    url = f"http://127.0.0.1:{config.port}"
    with server_process(proxy_command(path, config, executable), f"{url}/health/liveliness", env=environ):
        yield url


def ranks(url: str, prompts_per_rank: list[list[str]]) -> list[list[str]]:
    """Run one process per prompt list, all at once; each returns its replies in order."""
    environ = {**os.environ, "LITELLM_MASTER_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    processes = [subprocess.Popen([sys.executable, "-c", RANK, url, json.dumps(prompts)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=environ, text=True) for prompts in prompts_per_rank]
    replies = []
    for process in processes:
        out, err = process.communicate(timeout=400)
        assert process.returncode == 0, err[-3000:]
        replies.append(json.loads(out.strip().splitlines()[-1]))
    return replies


@pytest.mark.slow
def test_a_second_process_reads_the_first_ones_cached_judgement(proxy, provider):
    before = len(provider.requests)
    (first,) = ranks(proxy, [["is 2 + 3 = 5 right?"]])
    (second,) = ranks(proxy, [["is 2 + 3 = 5 right?"]])
    assert first == second == ["verdict for is 2 + 3 = 5 right?"]
    assert len(provider.requests) == before + 1  # the second process's call never reached the provider


@pytest.mark.slow
def test_two_ranks_share_one_rate_limit(proxy, provider):
    """rpm=60 is the account's: two processes sending 40 distinct calls each get every reply, and
    the provider never sees more than 60 calls in one minute (LiteLLM counts by clock minute)."""
    before = len(provider.requests)
    offset = time.time() - time.monotonic()  # the server records monotonic times
    prompts = [[f"rank {rank} call {i}" for i in range(40)] for rank in range(2)]
    replies = ranks(proxy, prompts)
    assert replies == [[f"verdict for {p}" for p in rank] for rank in prompts]  # nothing lost, nothing mixed up
    seen = provider.requests[before:]
    assert len(seen) == 80
    per_minute = Counter(int((at + offset) // 60) for _, _, at in seen)
    assert max(per_minute.values()) <= 60 and len(per_minute) >= 2, per_minute


@pytest.mark.slow
def test_a_dead_proxy_is_a_clear_error_and_a_late_one_is_retried(provider, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_MASTER_KEY", KEY)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    quick = make_llm(f"proxy:{url}", config=LLMConfig(cache_dir=None, timeout_s=5, max_retries=1, backoff_initial_s=0.1))
    with pytest.raises(LLMCallError, match=f"127.0.0.1:{port}"):  # names the proxy it could not reach
        run_sync(quick.complete([{"role": "user", "content": "anyone there?"}], None, max_tokens=8))
    # the proxy comes up while a patient client is retrying: the call succeeds, nothing is lost
    config = ProxyConfig(model="openai/loopback", api_base=provider.base, port=port)
    path = write_proxy_config(config, tmp_path / "proxy.yaml")
    patient = make_llm(f"proxy:{url}", config=LLMConfig(cache_dir=None, timeout_s=30, max_retries=60, backoff_initial_s=0.5,
                                                         backoff_max_s=2))
    result = {}
    thread = threading.Thread(target=lambda: result.update(reply=run_sync(
        patient.complete([{"role": "user", "content": "late proxy"}], None, max_tokens=8))))
    thread.start()
    time.sleep(1.0)
    environ = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with server_process(proxy_command(path, config), f"{url}/health/liveliness", env=environ):
        thread.join(timeout=120)
    assert result["reply"].text == "verdict for late proxy"
