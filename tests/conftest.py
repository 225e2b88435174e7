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


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server():
    """A real OpenAI-compatible server on loopback: llama-cpp-python serving the default GGUF."""
    import subprocess
    import sys
    import time
    import urllib.request

    require("llama_cpp", "server")
    from rubricgym.models import default_gguf_path

    port = _free_port()
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"llama_server_{port}.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while True:
        try:
            urllib.request.urlopen(base + "/models", timeout=2).read()
            break
        except Exception:
            if process.poll() is not None or time.time() > deadline:
                process.kill()
                raise RuntimeError(f"llama.cpp server did not start; see {log.name}")
            time.sleep(0.5)
    yield base
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


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
