"""Loading task records from local files, the shared benchmark folder, or the Hugging Face hub.

``load_records(source)`` accepts:

* a path to a ``.jsonl`` / ``.json`` / ``.parquet`` file;
* a short name of a public benchmark that an env family registered (:func:`register_dataset`:
  ``"gsm8k"``, ``"math500"``, ``"covid_faq"`` ...): read from
  the shared data folder when it is present (``$RUBRICGYM_DATA_DIR``, else ``../shared/data``
  seen from the working directory or from this checkout), else from its Hugging Face id;
* a Hugging Face dataset id (``"BytedTsinghua-SIA/DAPO-Math-17k"``), through ``datasets``.

Offline, a hub id fails with :class:`DatasetLoadError` saying so, not with a network trace.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class DatasetLoadError(RuntimeError):
    """A dataset could not be loaded; the message says what was tried and what to do."""


#: short name -> (file under the shared data folder, Hugging Face id, split); env families add
#: the public sets they read with :func:`register_dataset` (the kernel lists none of its own)
KNOWN_DATASETS: dict[str, tuple[str, str, str]] = {}


def register_dataset(name: str, shared_file: str = "", hub_id: str = "", split: str = "train") -> None:
    """Name a public dataset for :func:`load_records`: its file under the shared data folder
    and/or its Hugging Face id and split (for users online)."""
    KNOWN_DATASETS[name] = (shared_file, hub_id, split)


def shared_data_dir() -> Path | None:
    """The shared benchmark data folder, if one is present on this machine."""
    candidates = []
    if os.environ.get("RUBRICGYM_DATA_DIR"):
        candidates.append(Path(os.environ["RUBRICGYM_DATA_DIR"]))
    candidates.append(Path.cwd().parent / "shared" / "data")
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def read_file(path: str | Path) -> list[dict[str, Any]]:
    """Read records from a JSONL, JSON (a list of objects) or parquet file."""
    path = Path(path)
    if not path.is_file():
        raise DatasetLoadError(f"no dataset file at {path}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        records = []
        with path.open(encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise DatasetLoadError(f"{path}:{line_number}: not valid JSON ({err.msg})") from None
        return records
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "data" in data:
            data = data["data"]
        if not isinstance(data, list):
            raise DatasetLoadError(f"{path}: expected a JSON list of records")
        return data
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DatasetLoadError("reading parquet needs pyarrow: pip install 'rubricgym[data]'") from None
        return pq.read_table(path).to_pylist()
    raise DatasetLoadError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .parquet)")


def load_hub(dataset_id: str, split: str = "train") -> list[dict[str, Any]]:
    """Load a Hugging Face dataset by id; a clear error when offline or not installed."""
    try:
        import datasets
    except ImportError:
        raise DatasetLoadError(
            f"loading {dataset_id!r} from the Hugging Face hub needs `datasets`: pip install 'rubricgym[data]'"
        ) from None
    try:
        return list(datasets.load_dataset(dataset_id, split=split))
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
        hint = " (HF_HUB_OFFLINE=1 is set)" if offline else " (is the hub reachable from here?)"
        raise DatasetLoadError(
            f"could not load Hugging Face dataset {dataset_id!r} split {split!r}{hint}: {type(err).__name__}: "
            f"{str(err)[:300]}. Pass a local .jsonl/.parquet path instead."
        ) from None


def load_records(source: str | Path, split: str | None = None) -> list[dict[str, Any]]:
    """Load raw records from a file path, a known short name, or a Hugging Face id."""
    source_str = str(source)
    if Path(source_str).suffix.lower() in (".jsonl", ".json", ".parquet") or Path(source_str).is_file():
        return read_file(source_str)
    if source_str in KNOWN_DATASETS:
        relative, hub_id, hub_split = KNOWN_DATASETS[source_str]
        folder = shared_data_dir()
        if relative and folder is not None and (folder / relative).is_file():
            return read_file(folder / relative)
        if not hub_id:
            raise DatasetLoadError(f"{source_str!r} is read from the shared data folder, which was not found; set RUBRICGYM_DATA_DIR")
        return load_hub(hub_id, split or hub_split)
    if "/" in source_str:
        return load_hub(source_str, split or "train")
    raise DatasetLoadError(
        f"unknown dataset {source_str!r}: give a .jsonl/.json/.parquet path, one of {sorted(KNOWN_DATASETS)}, "
        "or a Hugging Face id like 'owner/name'"
    )
