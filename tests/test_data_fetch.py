"""`rubricgym data fetch`: pinned upstream files -> the row layout the loaders read (tested on
local files through file:// URLs; offline it says what it would fetch and writes nothing)."""

import dataclasses
import json

import gymnasium as gym
import pytest

import rubricgym  # noqa: F401
from rubricgym.app.cli import main as cli_main
from rubricgym.data import KNOWN_DATASETS, DatasetFetchError, fetch_dataset, load_records


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv("RUBRICGYM_DATA_DIR", str(folder))  # searched first, and the fetch default
    return folder


def point_at(monkeypatch, name, *files, whole=False):
    """Make ``name`` fetch local files (file:// URLs) instead of its pinned upstream ones; the
    pinned row count is kept only for ``whole`` files (the others are excerpts)."""
    dataset = KNOWN_DATASETS[name]
    assert len(dataset.urls) == len(files) and all(u.startswith("https://raw.githubusercontent.com/") for u in dataset.urls)
    assert dataset.rows > 0  # every fetchable set pins its row count
    monkeypatch.setitem(KNOWN_DATASETS, name, dataclasses.replace(dataset, urls=tuple(f.as_uri() for f in files),
                                                                 rows=dataset.rows if whole else 0))


def test_gsm8k_fetched_from_its_upstream_layout_matches_the_shared_rows(tmp_path, data_dir, monkeypatch, shared_data):
    shared = [json.loads(line) for line in (shared_data / "gsm8k" / "gsm8k_test.jsonl").read_text().splitlines()[:50]]
    upstream = tmp_path / "test.jsonl"  # openai/grade-school-math's layout: question, rationale ending '#### N'
    upstream.write_text("".join(json.dumps({"question": r["problem"], "answer": r["solution"]}) + "\n" for r in shared))
    point_at(monkeypatch, "gsm8k", upstream)
    written = fetch_dataset("gsm8k")
    assert written == data_dir / "gsm8k" / "gsm8k_test.jsonl"
    assert [(r["problem"], r["answer"]) for r in load_records("gsm8k")] == [(r["problem"], r["answer"]) for r in shared]
    env = gym.make("Math-v0", dataset="gsm8k")
    _, info = env.reset(options={"task_id": "gsm8k-0"})
    assert env.step(f"\\boxed{{{shared[0]['answer']}}}")[1] == 1.0


def test_aime_answers_lose_leading_zeros_and_json_lists_are_read(tmp_path, data_dir, monkeypatch):
    upstream = tmp_path / "aime.json"
    upstream.write_text(json.dumps([{"problem": "Find N.", "answer": "025", "year": 1990}, {"problem": "Find M.", "answer": "0"}]))
    point_at(monkeypatch, "aime_1983_2023", upstream)
    rows = load_records(str(fetch_dataset("aime_1983_2023")))
    assert [(r["id"], r["answer"], r.get("year")) for r in rows] == [("aime_1983_2023-0", "25", 1990), ("aime_1983_2023-1", "0", None)]


def test_bfcl_questions_merge_their_possible_answers(tmp_path, data_dir, monkeypatch, shared_data):
    shared = [json.loads(line) for line in (shared_data / "bfcl_v4" / "simple_python.jsonl").read_text().splitlines()[:5]]
    questions, answers = tmp_path / "BFCL_v4_simple_python.json", tmp_path / "possible_answer.json"
    questions.write_text("".join(json.dumps({k: v for k, v in r.items() if k not in ("category", "ground_truth")}) + "\n"
                                 for r in shared))
    answers.write_text("".join(json.dumps({"id": r["id"], "ground_truth": r["ground_truth"]}) + "\n" for r in shared))
    point_at(monkeypatch, "bfcl_simple_python", questions, answers)
    fetch_dataset("bfcl_simple_python")
    assert load_records("bfcl_simple_python") == shared  # the shared folder's layout, row for row
    env = gym.make("FunctionCall-v0", dataset="simple_python")
    assert len(env.unwrapped.tasks) == 5


def test_llmbar_is_stored_as_is_and_validated(tmp_path, data_dir, monkeypatch):
    from rubricgym.app import llmbar

    llmbar.register()
    upstream = tmp_path / "dataset.json"
    upstream.write_text(json.dumps([{"input": "Say hi.", "output_1": "hi", "output_2": "bye", "label": 1}]))
    point_at(monkeypatch, "llmbar_natural", upstream)
    fetch_dataset("llmbar_natural")
    assert llmbar.load_pairs("natural") == [{"input": "Say hi.", "output_1": "hi", "output_2": "bye", "label": 1}]


def test_offline_fetch_says_what_it_would_fetch_and_writes_nothing(tmp_path, data_dir, monkeypatch, capsys):
    dead = "http://127.0.0.1:9/grade_school_math/data/test.jsonl"  # the discard port: refused at once
    monkeypatch.setitem(KNOWN_DATASETS, "gsm8k", dataclasses.replace(KNOWN_DATASETS["gsm8k"], urls=(dead,)))
    with pytest.raises(DatasetFetchError, match="offline\\? Nothing was written"):
        fetch_dataset("gsm8k", timeout_s=5)
    assert cli_main(["data", "fetch", "gsm8k", "--dest", str(tmp_path / "d")]) == 2
    out, err = capsys.readouterr()
    assert dead in out and "licence: MIT" in out and str(tmp_path / "d" / "gsm8k" / "gsm8k_test.jsonl") in out
    assert "not fetched" in err and not (tmp_path / "d").exists() and not data_dir.exists()
    assert cli_main(["data", "fetch", "xquad_en"]) == 2 and "join of several upstream files" in capsys.readouterr().err
    assert cli_main(["data", "fetch", "math500", "--dry-run"]) == 0
    assert "hkust-nlp/simpleRL-reason" in capsys.readouterr().out and not data_dir.exists()


def test_pinned_row_counts_are_the_shared_copies(shared_data):
    from rubricgym.app import llmbar

    llmbar.register()
    pinned = {name: d for name, d in KNOWN_DATASETS.items() if d.urls}
    assert len(pinned) >= 15
    for name, dataset in pinned.items():
        path = shared_data / dataset.file
        text = path.read_text()
        count = len(json.loads(text)) if path.suffix == ".json" else sum(1 for line in text.split("\n") if line.strip())
        assert dataset.rows == count, name


def test_a_download_cut_at_a_line_end_writes_nothing(tmp_path, data_dir, monkeypatch, shared_data):
    """An upstream file cut at a line end (51 of its rows) parses: the pinned row count catches it."""
    shared = [json.loads(line) for line in (shared_data / "gsm8k" / "gsm8k_test.jsonl").read_text().splitlines()]
    lines = [json.dumps({"question": r["problem"], "answer": r["solution"]}) + "\n" for r in shared]
    upstream = tmp_path / "test.jsonl"
    upstream.write_text("".join(lines[:51]))
    point_at(monkeypatch, "gsm8k", upstream, whole=True)
    with pytest.raises(DatasetFetchError, match="51 rows, the pinned upstream file 1,319: a cut download"):
        fetch_dataset("gsm8k")
    assert not data_dir.exists()
    upstream.write_text("".join(lines))
    assert len(load_records(str(fetch_dataset("gsm8k")))) == 1319


def test_a_body_shorter_than_its_content_length_and_a_wrong_checksum_write_nothing(tmp_path, data_dir, monkeypatch):
    """A server that closes the connection before Content-Length bytes (http.client's IncompleteRead
    escaped before), and a pinned checksum that does not match."""
    import hashlib
    import http.server
    import threading

    body = b'{"question": "1+1?", "answer": "#### 2"}\n'

    class Short(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + 1000) if self.path == "/short" else str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Short)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        gsm8k = KNOWN_DATASETS["gsm8k"]
        monkeypatch.setitem(KNOWN_DATASETS, "gsm8k", dataclasses.replace(gsm8k, urls=(f"{base}/short",), rows=0))
        with pytest.raises(DatasetFetchError, match="IncompleteRead"):
            fetch_dataset("gsm8k", timeout_s=10)
        monkeypatch.setitem(KNOWN_DATASETS, "gsm8k", dataclasses.replace(gsm8k, urls=(f"{base}/whole",), rows=0,
                                                                         sha256=("0" * 64,)))
        with pytest.raises(DatasetFetchError, match="is not the pinned 0000"):
            fetch_dataset("gsm8k", timeout_s=10)
        assert not data_dir.exists()
        monkeypatch.setitem(KNOWN_DATASETS, "gsm8k", dataclasses.replace(gsm8k, urls=(f"{base}/whole",), rows=1,
                                                                         sha256=(hashlib.sha256(body).hexdigest(),)))
        assert load_records(str(fetch_dataset("gsm8k", timeout_s=10)))[0]["answer"] == "2"
    finally:
        server.shutdown()
