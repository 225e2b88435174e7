"""`rubricgym judge-eval` / benchmarks/judge_llmbar.py: the instrument is calibrated (a simulated
judge of accuracy a measures about a), LLMBar's metrics are computed as the paper defines them,
and a real judge behind a loopback server runs through it."""

import json

import pytest

from rubricgym.app.cli import main as cli_main
from rubricgym.app.llmbar import PairVerdicts, judge_pairs, pair_trajectories, published_rows


def test_simulated_judges_measure_their_own_accuracy(shared_data):
    assert judge_pairs("oracle:1.0", "natural", progress=False).accuracy == 1.0
    measured = judge_pairs("oracle:0.7", "adversarial_neighbor", progress=False)
    low, high = measured.interval()
    assert low <= 0.7 <= high and measured.pairs == 134
    chance = judge_pairs("random", "natural", progress=False)
    assert chance.interval()[0] <= 0.5 <= chance.interval()[1]


def test_llmbar_metrics_and_presentation_orders():
    verdicts = PairVerdicts("j", "natural", correct=[(True, True), (True, False), (False, False)])
    assert verdicts.accuracy == pytest.approx(0.5) and verdicts.both_correct == pytest.approx(1 / 3)
    row = {"input": "Say hi.", "output_1": "bye", "output_2": "hi", "label": 2}
    (first, second), gold = pair_trajectories(row, gold_first=False)
    assert (first[-1]["content"], second[-1]["content"], gold) == ("bye", "hi", 1)
    (first, _), gold = pair_trajectories(row, gold_first=True)
    assert (first[-1]["content"], gold) == ("hi", 0)


def test_published_rows_and_the_cli(shared_data, capsys):
    rows = published_rows("natural")
    assert rows["GPT-4 (Vanilla)"] == {"accuracy": 0.955, "both_correct": 0.93}
    assert cli_main(["judge-eval", "--judge", "oracle:1.0", "--subsets", "natural", "--limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "pairs=  5 acc=1.000" in out and "published GPT-4 (Vanilla)" in out
    assert cli_main(["judge-eval", "--judge", "random", "--subsets", "nope"]) == 2


@pytest.mark.server
def test_a_real_judge_behind_a_loopback_server(llama_server, shared_data, tmp_path):
    from rubricgym.llm import LLMConfig, make_llm

    judge = make_llm("openai/smollm2", api_base=llama_server,
                     config=LLMConfig(cache_dir=str(tmp_path / "cache"), timeout_s=300, max_retries=1))
    verdicts = judge_pairs(judge, "natural", limit=2, progress=False)
    assert verdicts.pairs == 2 and judge.usage.calls >= 4 - verdicts.failures  # both orders of both pairs were sent
    assert 0.0 <= verdicts.accuracy <= 1.0 and verdicts.tokens > 0
    assert json.loads(json.dumps(verdicts.correct))  # plain booleans (numpy bools once made pairs count half)


def test_probability_scoring_needs_next_token_probabilities():
    from judges import scripted_judge

    from rubricgym.judges.ruler import RulerConfig, ruler_score_sync

    group = [[{"role": "user", "content": "2+3?"}, {"role": "assistant", "content": a}] for a in ("5", "7")]
    result = ruler_score_sync(group, scripted_judge()[0], RulerConfig(scoring="probability"))
    assert result.failed and "probability scoring needs next-token probabilities" in result.error
    with pytest.raises(ValueError, match="scoring must be"):
        RulerConfig(scoring="vibes")


@pytest.mark.slow
def test_probability_scoring_with_the_in_process_judge_gives_distinct_expected_scores():
    from rubricgym.judges.ruler import RulerConfig, ruler_score_sync
    from rubricgym.llm import make_llm

    judge = make_llm("local")
    group = [[{"role": "system", "content": "Answer math questions."}, {"role": "user", "content": "What is 2+3?"},
              {"role": "assistant", "content": a}] for a in ("2 + 3 = 5.", "It is 7.", "banana", "2 + 3 = 5.")]
    result = ruler_score_sync(group, judge, RulerConfig(scoring="probability", permutations=2))
    assert not result.failed and result.judge_calls == 2 and result.unique == 3
    # the client counts what it read, as for a written reply (the bench's cost columns read it)
    assert judge.usage.calls == 2 and judge.usage.prompt_tokens == result.prompt_tokens > 0
    assert all(0.05 <= s <= 0.95 for s in result.scores) and len(set(result.scores[:3])) == 3  # a ranking, no ties
    assert result.scores[0] == result.scores[3]  # identical trajectories judged once
    assert all(len(raw) == 2 for raw in result.raw_scores)  # one expected score per presentation order
