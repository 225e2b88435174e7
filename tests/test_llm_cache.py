"""The judge's reply cache is plain JSON, never caches a failure, and survives corruption."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from rubricgym.judges.ruler import RulerConfig, ruler_score_sync
from rubricgym.llm import LLMConfig

from judges import reply_scores, scripted_judge


def traj(text: str) -> list[dict]:
    return [{"role": "system", "content": "Be helpful."}, {"role": "user", "content": "Hi?"},
            {"role": "assistant", "content": text}]


GROUP = [traj("answer quality=0.3"), traj("answer quality=0.8")]


def test_a_failed_judgement_is_not_cached(tmp_path):
    broken = {"on": True}
    judge, backend = scripted_judge(lambda m, i: "garbage, no JSON" if broken["on"] else reply_scores(m),
                                    cache_dir=str(tmp_path / "cache"))
    first = ruler_score_sync(GROUP, judge, RulerConfig(max_fixes=1))
    assert first.failed and len(backend.requests) == 2  # the call and one fix request
    broken["on"] = False  # the judge recovers: the same group reaches it again
    second = ruler_score_sync(GROUP, judge, RulerConfig(max_fixes=1))
    assert not second.failed and second.scores == pytest.approx([0.3, 0.8]) and len(backend.requests) == 3
    third = ruler_score_sync(GROUP, judge, RulerConfig(max_fixes=1))  # a good judgement is cached
    assert third.scores == second.scores and len(backend.requests) == 3 and third.cache_hits == 1


def test_values_are_stored_as_json_text_and_pickles_are_refused(tmp_path):
    import diskcache

    folder = str(tmp_path / "cache")
    judge, backend = scripted_judge(cache_dir=folder)
    ruler_score_sync(GROUP, judge)
    with sqlite3.connect(os.path.join(folder, "cache.db")) as db:
        rows = db.execute("SELECT key, mode, value FROM Cache WHERE key != 'probe'").fetchall()
    assert len(rows) == 1 and rows[0][1] != diskcache.core.MODE_PICKLE
    assert isinstance(rows[0][2], str) and "scores" in json.loads(rows[0][2])["text"]  # small replies sit in the row

    # someone with write access to the folder plants a pickle that runs code when loaded
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    diskcache.Cache(folder).set(rows[0][0], Exploit())  # the default Disk pickles it
    again, backend2 = scripted_judge(cache_dir=folder)
    result = ruler_score_sync(GROUP, again)
    assert not marker.exists()  # never unpickled
    assert result.scores == pytest.approx([0.3, 0.8]) and len(backend2.requests) == 1  # a miss: asked again


def test_corrupt_entries_and_databases_are_misses(tmp_path):
    folder = tmp_path / "cache"
    judge, _ = scripted_judge(cache_dir=str(folder))
    ruler_score_sync(GROUP, judge)
    with sqlite3.connect(folder / "cache.db") as db:  # a truncated value
        db.execute("UPDATE Cache SET value = '{\"text\": \"tru' WHERE key != 'probe'")
    again, backend = scripted_judge(cache_dir=str(folder))
    assert ruler_score_sync(GROUP, again).scores == pytest.approx([0.3, 0.8]) and len(backend.requests) == 1
    (folder / "cache.db").write_bytes(b"this is not a database" * 100)  # a corrupt database
    with pytest.warns(UserWarning, match="moved it to"):
        rebuilt, backend = scripted_judge(cache_dir=str(folder))
    assert ruler_score_sync(GROUP, rebuilt).scores == pytest.approx([0.3, 0.8]) and len(backend.requests) == 1
    assert list(tmp_path.glob("cache.corrupt-*"))  # kept aside, not deleted


def test_lone_surrogates_and_deep_nesting_in_judge_traffic(tmp_path):
    judge, _ = scripted_judge(cache_dir=str(tmp_path / "cache"))
    result = ruler_score_sync([traj("\ud800 \\boxed{1} quality=0.4"), traj("fine quality=0.6")], judge)
    assert result.scores == pytest.approx([0.4, 0.6])
    deep, backend = scripted_judge(lambda m, i: "[" * 5000 + "]" * 5000, cache_dir=None, max_retries=0)
    failed = ruler_score_sync(GROUP, deep, RulerConfig(max_fixes=1))
    assert failed.failed and "nested too deeply" in failed.error and len(backend.requests) == 2


def test_cache_off_still_works(tmp_path):
    judge, backend = scripted_judge(cache_dir=None)
    ruler_score_sync(GROUP, judge)
    ruler_score_sync(GROUP, judge)
    assert len(backend.requests) == 2 and judge.usage.cache_hits == 0
    assert LLMConfig(cache_dir=None).cache_dir is None
