import os

# Tests never reach a network: no hub downloads, no LiteLLM price-table fetch.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from rubricgym.data import shared_data_dir  # noqa: E402


def require(module: str, extra: str):
    """Import an optional dependency: without it, a plain pytest run skips with the reason (and the
    install line), while CI (``CI`` set) fails, since CI installs every extra the tests need."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"{module} is not installed (pip install 'rubricgym[{extra}]')"
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must install it", pytrace=False)
        raise pytest.skip.Exception(message, allow_module_level=True)  # only where the module is absent


@pytest.fixture(scope="session")
def shared_data() -> Path:
    folder = shared_data_dir()
    message = "../shared/data is not beside this checkout (set RUBRICGYM_DATA_DIR)"
    if folder is None and os.environ.get("CI"):
        pytest.fail(message)  # CI always has the shared data: its absence is an error there
    return folder if folder is not None else pytest.skip(message)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory) -> str:
    """The tiny random model (:mod:`rubricgym.testing.tiny`: the default tokenizer and chat template
    on a 2-layer Llama, seed 0) as a transformers folder, built offline once per session. Tests of
    plumbing pass it as ``PolicyConfig(model=...)`` or ``--model``; only tests that assert learning,
    a real judge's behaviour or the shipped model file load the 135M model."""
    require("transformers", "agents")
    from rubricgym.testing.tiny import tiny_model_dir

    return str(tiny_model_dir(tmp_path_factory.mktemp("tiny") / "tiny-llama"))


def _free_port() -> int:
    from rubricgym.testing.loopback import free_port

    return free_port()


def _llama_death(process) -> str:
    """Why the llama.cpp server is gone: its exit status (a signal named) and the end of its output."""
    import signal

    code = process.returncode
    status = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    hint = (" (an instruction this CPU reports but the machine does not enable: build llama-cpp-python with "
            "CMAKE_ARGS=-DGGML_NATIVE=OFF, as README's test command does)") if code == -signal.SIGILL else ""
    return f"the llama.cpp server died: {status}{hint}; its last output:\n{process.output_tail(1500)}"


@pytest.fixture(scope="session")
def _llama_process():
    """llama-cpp-python serving the default GGUF on loopback, started once and proven by one real
    completion (a build that cannot compute on this CPU fails here, named, not as connection errors)."""
    import contextlib
    import json
    import subprocess
    import sys
    import urllib.request

    require("llama_cpp", "server")
    from rubricgym.models import default_gguf_path
    from rubricgym.testing.loopback import server_process

    port = _free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with server_process([sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
                         "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"], base + "/models") as process:
        request = urllib.request.Request(base + "/chat/completions", method="POST", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"model": "smollm2", "max_tokens": 2, "messages": [
                                             {"role": "user", "content": "Name one colour of the rainbow, in one word."}]}).encode())
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                json.loads(response.read())
        except OSError as error:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)  # a crash closes the connection a moment before the process is reaped
            if process.poll() is not None:
                pytest.fail(_llama_death(process), pytrace=False)
            raise RuntimeError(f"the llama.cpp server did not complete a 2-token reply: {error}") from error
        yield base, process


@pytest.fixture
def llama_server(_llama_process):
    """The loopback llama.cpp server's ``/v1`` base URL; a test during which it dies fails with why."""
    base, process = _llama_process
    if process.poll() is not None:
        pytest.fail(_llama_death(process), pytrace=False)
    yield base
    if process.poll() is not None:
        pytest.fail(_llama_death(process), pytrace=False)


@pytest.fixture(scope="session")
def bwrap():
    """The bubblewrap sandbox: CI installs it (.ci/run), elsewhere its absence is a stated skip."""
    from rubricgym.sandbox import bwrap_problem

    problem = bwrap_problem()
    if problem and os.environ.get("CI"):
        pytest.fail(f"the sandbox cannot run in CI: {problem}")
    if problem:
        raise pytest.skip.Exception(problem)  # only where bubblewrap is absent or cannot run
    return True


@pytest.fixture(scope="session")
def chromium() -> str:
    """Headless Chromium for the report test: CI installs it (.ci/run); elsewhere its absence is a stated skip."""
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None and os.environ.get("CI"):
        pytest.fail("chromium is not installed: CI must install it (apt-get install chromium)")
    if found is None:
        raise pytest.skip.Exception("chromium is not installed (apt-get install chromium)")  # only where it is absent
    return found


# Tests that use these fixtures belong to the slow tier whatever their own marks say: a real
# llama.cpp server (compiled at install) or a real browser.
SLOW_FIXTURES = frozenset({"llama_server", "_llama_process", "chromium"})


@pytest.fixture(autouse=True)
def _fast_tier_loads_no_real_model(request, monkeypatch):
    """The tiers' rule, enforced: a test outside the slow tier that loads the 135M model's weights
    (a policy or an in-process judge without a model of its own) fails and says what to do."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    import rubricgym.models as models

    real, loaded = models.load_model_and_tokenizer, []

    def guarded(model=None, *args, **kwargs):
        if models.is_default_model(model):
            loaded.append(model)
            pytest.fail("this fast-tier test loads the 135M default model: give it the tiny model "
                        "(the tiny_model_path fixture) or mark it slow", pytrace=True)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(models, "load_model_and_tokenizer", guarded)
    yield
    assert not loaded, "the 135M default model was loaded (and the failure swallowed by the code under test)"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
