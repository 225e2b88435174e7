import os

# Tests never reach a network: no hub downloads, no LiteLLM price-table fetch.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from rubricgym.data import shared_data_dir  # noqa: E402


@pytest.fixture(scope="session")
def shared_data() -> Path:
    folder = shared_data_dir()
    if folder is None:
        pytest.skip("../shared/data is not beside this checkout (set RUBRICGYM_DATA_DIR)")
    return folder
