"""Loading task records from local files, the shared benchmark folder, or the Hugging Face hub.

``load_records(source)`` accepts:

* a path to a ``.jsonl`` / ``.json`` / ``.parquet`` file;
* a short name of a public benchmark that an env family registered (:func:`register_dataset`:
  ``"gsm8k"``, ``"math500"``, ``"covid_faq"`` ...): read from the first data folder that has its
  file (``$RUBRICGYM_DATA_DIR``, ``../shared/data`` seen from the working directory or from this
  checkout, then the user data folder that ``rubricgym data fetch NAME`` fills), else from its
  Hugging Face id;
* a Hugging Face dataset id (``"BytedTsinghua-SIA/DAPO-Math-17k"``), through ``datasets``.

Offline, a hub id fails with :class:`DatasetLoadError` saying so, not with a network trace.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

CHECKOUT_ROOT = Path(__file__).resolve().parents[2]
"""The repository's root when rubricgym runs from a checkout (this file is ``src/rubricgym/data.py``);
from an installed wheel, the folder above site-packages, where nothing of the checkout's is found."""


class DatasetLoadError(RuntimeError, ValueError):
    """A dataset could not be loaded; the message says what was tried and what to do."""


@dataclass(frozen=True)
class PublicDataset:
    """A public dataset an env family reads by short name, and where it comes from."""

    name: str
    file: str = ""
    """Its path under a data folder (e.g. ``gsm8k/gsm8k_test.jsonl``); empty: hub only."""
    hub_id: str = ""
    """Its Hugging Face id, for users online (``datasets`` installed)."""
    split: str = "train"
    urls: tuple[str, ...] = ()
    """The upstream file(s) at a pinned commit that ``rubricgym data fetch`` downloads."""
    licence: str = ""
    """The licence of the upstream files (stated before every fetch)."""
    convert: Callable[[list[bytes]], list[dict[str, Any]]] | None = None
    """Upstream file contents -> the rows written to ``file`` (None: the single file as it is)."""
    rows: int = 0
    """Rows a whole download gives at least (the count of ../shared/data's copy); fewer is a cut
    download and nothing is written (0: not checked)."""
    sha256: tuple[str, ...] = ()
    """Pinned SHA-256 of each upstream file (empty: not pinned); a mismatch writes nothing."""


#: short name -> where it is; env families add the public sets they read with
#: :func:`register_dataset` (the kernel lists none of its own)
KNOWN_DATASETS: dict[str, PublicDataset] = {}


def register_dataset(name: str, shared_file: str = "", hub_id: str = "", split: str = "train", *,
                     urls: tuple[str, ...] = (), licence: str = "",
                     convert: Callable[[list[bytes]], list[dict[str, Any]]] | None = None,
                     rows: int = 0, sha256: tuple[str, ...] = ()) -> None:
    """Name a public dataset for :func:`load_records`: its file under a data folder, its Hugging
    Face id and split (for users online), and the pinned upstream file(s) with their licence that
    :func:`fetch_dataset` downloads and ``convert`` turns into that file's rows (at least ``rows``
    of them; each file matching its ``sha256`` where pinned)."""
    if sha256 and len(sha256) != len(urls):
        raise ValueError(f"{name}: {len(sha256)} checksums for {len(urls)} upstream files")
    KNOWN_DATASETS[name] = PublicDataset(name, shared_file, hub_id, split, tuple(urls), licence, convert, rows,
                                         tuple(sha256))


def user_data_dir() -> Path:
    """Where ``rubricgym data fetch`` writes: ``$RUBRICGYM_DATA_DIR``, else ``~/.cache/rubricgym/data``."""
    if os.environ.get("RUBRICGYM_DATA_DIR"):
        return Path(os.environ["RUBRICGYM_DATA_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rubricgym" / "data"


def data_dirs() -> list[Path]:
    """The data folders present on this machine, searched in this order."""
    candidates = [Path(os.environ["RUBRICGYM_DATA_DIR"])] if os.environ.get("RUBRICGYM_DATA_DIR") else []
    candidates += [Path.cwd().parent / "shared" / "data", CHECKOUT_ROOT.parent / "shared" / "data",
                   user_data_dir()]
    unique: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir() and candidate.resolve() not in [u.resolve() for u in unique]:
            unique.append(candidate)
    return unique


def shared_data_dir() -> Path | None:
    """The first data folder present on this machine (the shared benchmark folder, when beside us)."""
    folders = data_dirs()
    return folders[0] if folders else None


def find_data_file(relative: str) -> Path | None:
    """``relative`` in the first data folder that has it."""
    for folder in data_dirs():
        if (folder / relative).is_file():
            return folder / relative
    return None


class DatasetFetchError(DatasetLoadError):
    """``rubricgym data fetch`` could not download; the message says what it would have fetched."""

    def __init__(self, message: str, url: str = "", reason: str = ""):
        super().__init__(message)
        self.url, self.reason = url, reason


def fetch_plan(name: str, dest: Path | None = None) -> str:
    """What fetching ``name`` would download, under which licence, to where."""
    dataset = _fetchable(name)
    target = (dest or user_data_dir()) / dataset.file
    lines = [f"{name}: {len(dataset.urls)} upstream file(s), licence: {dataset.licence or 'not stated upstream'}"]
    lines += [f"  {url}" for url in dataset.urls]
    lines.append(f"  -> {target}")
    return "\n".join(lines)


def _fetchable(name: str) -> PublicDataset:
    dataset = KNOWN_DATASETS.get(name)
    if dataset is None:
        raise DatasetLoadError(f"unknown dataset {name!r}; known: {', '.join(sorted(KNOWN_DATASETS))}")
    if not dataset.urls or not dataset.file:
        where = (f"load it online from the Hugging Face hub ({dataset.hub_id})" if dataset.hub_id else
                 "it is a join of several upstream files; read it from a data folder such as ../shared/data")
        raise DatasetLoadError(f"{name!r} has no pinned upstream file to fetch: {where}")
    return dataset


def fetch_dataset(name: str, dest: Path | None = None, timeout_s: float = 60.0) -> Path:
    """Download ``name``'s upstream file(s), convert them to the row layout its loader reads and
    write ``<dest>/<file>`` (JSONL, or the upstream file as it is); returns the written path.
    Offline, :class:`DatasetFetchError` says what would have been fetched."""
    dataset = _fetchable(name)
    target = (dest or user_data_dir()) / dataset.file
    contents = []
    for index, url in enumerate(dataset.urls):
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                body = response.read()  # http.client raises IncompleteRead when it gets less than Content-Length
                length = response.headers.get("Content-Length")
            if length is not None and length.strip().isdigit() and len(body) != int(length):
                raise DatasetFetchError(f"{url}: {len(body):,} bytes received of {int(length):,}; nothing was written",
                                        url, "cut")
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or f"{type(err).__name__}: {err}"
            raise DatasetFetchError(f"could not download {url} ({reason}); offline? Nothing was written. "
                                    f"This would fetch:\n{fetch_plan(name, dest)}", url, str(reason)) from None
        if dataset.sha256 and hashlib.sha256(body).hexdigest() != dataset.sha256[index]:
            raise DatasetFetchError(f"{url}: SHA-256 {hashlib.sha256(body).hexdigest()} is not the pinned "
                                    f"{dataset.sha256[index]}; nothing was written", url, "checksum")
        contents.append(body)
    rows = dataset.convert(contents) if dataset.convert is not None else None
    count = len(rows) if rows is not None else len(read_jsonl_or_json(contents[0]))
    if count < dataset.rows:
        raise DatasetFetchError(f"{name}: the download holds {count:,} rows, the pinned upstream file {dataset.rows:,}: "
                                "a cut download; nothing was written", dataset.urls[0], "too few rows")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    if rows is None:
        partial.write_bytes(contents[0])
    else:
        partial.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    partial.replace(target)  # atomic: a failed fetch never leaves half a file for the loader
    return target


def read_jsonl_or_json(content: bytes) -> list[dict[str, Any]]:
    """Rows of an upstream file that is JSON lines, or one JSON list (some ``.json`` files are JSONL)."""
    text = content.decode("utf-8").strip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


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
        dataset = KNOWN_DATASETS[source_str]
        found = find_data_file(dataset.file) if dataset.file else None
        if found is not None:
            return read_file(found)
        if not dataset.hub_id:
            fetch = f"run `rubricgym data fetch {source_str}`, or " if dataset.urls else ""
            raise DatasetLoadError(f"{source_str!r} ({dataset.file}) is in no data folder: {fetch}set RUBRICGYM_DATA_DIR "
                                   "to a folder that has it")
        return load_hub(dataset.hub_id, split or dataset.split)
    if "/" in source_str:
        return load_hub(source_str, split or "train")
    raise DatasetLoadError(
        f"unknown dataset {source_str!r}: give a .jsonl/.json/.parquet path, one of {sorted(KNOWN_DATASETS)}, "
        "or a Hugging Face id like 'owner/name'"
    )
