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
    from rubricgym.testing.loopback import free_port

    return free_port()


@pytest.fixture(scope="session")
def llama_server():
    """A real OpenAI-compatible server on loopback: llama-cpp-python serving the default GGUF."""
    import sys

    require("llama_cpp", "server")
    from rubricgym.models import default_gguf_path
    from rubricgym.testing.loopback import server_process

    port = _free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with server_process([sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
                         "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"], base + "/models"):
        yield base


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
