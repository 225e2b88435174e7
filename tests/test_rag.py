"""RagSupport-v0 / RagSupportRuler-v0: contract, components, retrieval, bad input."""

import json
import time

import gymnasium as gym
import numpy as np
import pytest
from conftest import require  # noqa: E402
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.envs.rag import Article, RagSupportEnv, SupportDataset, RagTask, load_support_dataset
from rubricgym.envs.rag.retrieval import BM25Retriever

from judges import reply_scores, scripted_judge

require("bm25s", "rag")

SEARCH = '<tool_call>{"name": "search", "arguments": %s}</tool_call>'


def judge():
    return scripted_judge(lambda m, i: reply_scores(m, scorer=lambda body: 0.8 if "[REF-01]" in body else 0.3))[0]


@pytest.mark.parametrize("mode", ["context", "agentic"])
def test_check_env_single_and_group(mode):
    check_env(gym.make("RagSupport-v0", mode=mode).unwrapped)
    check_env(gym.make("RagSupportRuler-v0", mode=mode, judge=judge()).unwrapped)
    check_env(gym.make("RagSupportRuler-v0", mode=mode, judge=judge()))
    for env_id, extra in (("RagSupport-v0", {}), ("RagSupportRuler-v0", {"judge": judge()})):
        envs = gym.make_vec(env_id, num_envs=4, group_size=2, mode=mode, **extra)
        obs, info = envs.reset(seed=0)
        assert info["task_id"][0] == info["task_id"][1] and envs.observation_space.contains(obs)
        for _ in range(envs.unwrapped.envs[0].unwrapped.max_turns):
            obs, rewards, terminated, truncated, info = envs.step(["I cannot find this [REF-01]"] * 4)
            if (terminated | truncated).all():
                break
        assert (terminated | truncated).all() and np.isfinite(rewards).all()


def test_builtin_knowledge_base_size_and_kinds():
    ds = load_support_dataset("builtin")
    assert len(ds.articles) >= 40 and len(ds.tasks) >= 150
    topics = {a.id.split("-")[0] for a in ds.articles}
    assert {"REF", "SHP", "ACC", "BIL", "WAR", "PRV"} <= topics
    assert sum(not t.answerable for t in ds.tasks) >= 20
    assert sum(len(t.supporting_ids) > 1 for t in ds.tasks) >= 15
    ids = {a.id for a in ds.articles}
    assert all(set(t.supporting_ids) <= ids for t in ds.tasks)


def test_context_mode_good_answer_scores_high():
    env = gym.make("RagSupport-v0")
    obs, info = env.reset(options={"task_id": "Q001"})
    assert "[REF-01]" in obs[-1]["content"] and "REF-01" in info["retrieved_ids"]
    _, reward, terminated, _, info = env.step(
        "You can return an unread, undamaged printed book within 30 days of delivery for a full refund [REF-01].")
    c = info["reward_components"]
    assert terminated and c["citation"] == 1.0 and c["refusal"] == 1.0 and c["grounded"] == 1.0 and c["f1"] > 0.9
    assert reward == pytest.approx(0.4 * c["f1"] + 0.6)


def test_unanswerable_question_rewards_refusal():
    env = gym.make("RagSupport-v0")
    task = next(t for t in env.unwrapped.dataset.tasks if not t.answerable)
    _, info = env.reset(options={"task_id": task.id})
    assert not {"answer", "answerable", "supporting_ids"} & set(info)  # nothing an agent fed info could copy
    _, _, _, _, good = env.step("I'm sorry, our knowledge base does not cover this. Please contact help@lumenbooks.example.")
    env.reset(options={"task_id": task.id})
    _, _, _, _, bad = env.step("Yes, we offer a 15 percent discount for 2 years [REF-01].")
    assert good["reward_components"]["refusal"] == 1.0 and good["reward_components"]["citation"] == 1.0
    assert bad["reward_components"]["refusal"] == 0.0 and bad["reward_components"]["citation"] == 0.0
    assert set(bad["unsupported_facts"]) >= {"number:15", "duration:2 year"}


def refund_example(shared_data):
    return json.loads((shared_data.parent / "examples" / "refund_group.json").read_text())


def test_seed_refund_example_ranked_by_components(shared_data):
    data = refund_example(shared_data)
    dataset = SupportDataset("refund", [Article("KB-1", data["context"], "Refund policy")],
                             [RagTask("refund", data["question"], data["context"], ("KB-1",), True)],
                             company="the shop", contact="support")
    env = RagSupportEnv(dataset=dataset, retriever="bm25", top_k=1)
    results = {}
    for name, answer in data["responses"].items():
        env.reset(options={"task_id": "refund"})
        _, reward, _, _, info = env.step(answer)
        results[name] = (reward, info["reward_components"], info["unsupported_facts"])
    c = {k: v[1] for k, v in results.items()}
    assert c["faithful"] == pytest.approx({"f1": 0.8182, "citation": 0.0, "refusal": 1.0, "grounded": 1.0}, abs=1e-3)
    assert c["verbose"] == pytest.approx({"f1": 0.5, "citation": 0.0, "refusal": 1.0, "grounded": 1.0}, abs=1e-3)
    assert c["hallucinating"] == pytest.approx({"f1": 0.3478, "citation": 0.0, "refusal": 1.0, "grounded": 1 / 3}, abs=1e-3)
    assert c["off_context"] == pytest.approx({"f1": 0.1, "citation": 0.0, "refusal": 0.0, "grounded": 1.0}, abs=1e-3)
    # the invented 90-day store credit and the phone number are named
    assert results["hallucinating"][2] == ["phone:1-800-refund", "duration:90 day"]
    order = sorted(results, key=lambda k: -results[k][0])
    assert order == data["expected_order"] == ["faithful", "verbose", "hallucinating", "off_context"]


def test_agentic_search_then_answer():
    env = gym.make("RagSupport-v0", mode="agentic")
    obs, info = env.reset(options={"task_id": "Q025"})  # express shipping cost
    assert "search" in obs[0]["content"] and info["tools"][0]["function"]["name"] == "search"
    obs, reward, terminated, _, info = env.step(SEARCH % json.dumps({"query": "express shipping cost"}))
    assert not terminated and obs[-1]["role"] == "tool" and "[SHP-02]" in obs[-1]["content"]
    _, reward, terminated, _, info = env.step("Express shipping costs 9 euros per order [SHP-02].")
    assert terminated and info["reward_components"]["citation"] == 1.0 and info["reward_components"]["grounded"] == 1.0


@pytest.mark.parametrize("arguments, fragment", [
    ({}, "query: Field required"),
    ({"query": 42}, "query: Input should be a valid string"),
    ({"query": ""}, "at least 1 character"),
    ({"query": "x" * 5_000}, "at most 1000 characters"),
    ({"query": "x" * 1_000_000}, "over the limit of 50,000"),  # the whole reply is refused first
    ({"query": "zzzz qqqq"}, "no article matches"),
])
def test_bad_search_calls_give_clear_observations(arguments, fragment):
    env = gym.make("RagSupport-v0", mode="agentic")
    env.reset(options={"task_id": "Q001"})
    start = time.process_time()  # CPU time: bounded work is tested, not the machine's load
    obs, reward, terminated, truncated, info = env.step(SEARCH % json.dumps(arguments))
    assert time.process_time() - start < 5
    assert not terminated and fragment in obs[-1]["content"] and fragment in info["error"]


def test_answer_before_any_search_is_scored_and_flagged():
    env = gym.make("RagSupport-v0", mode="agentic")
    env.reset(options={"task_id": "Q001"})
    _, reward, terminated, _, info = env.step("You have 30 days to return it.")
    assert terminated and info["reward_components"]["grounded"] == 0.0
    assert "before any search" in info["warning"]


def test_malformed_and_wrong_typed_actions():
    env = gym.make("RagSupport-v0", mode="agentic", disable_env_checker=True)
    env.reset(options={"task_id": "Q001"})
    obs, _, terminated, _, info = env.step("<tool_call>{oops</tool_call>")
    assert not terminated and "not valid JSON" in info["error"]
    obs, _, terminated, _, info = env.step(None)
    assert "got NoneType" in info["error"]


def test_retrieval_recall_on_builtin():
    ds = load_support_dataset("builtin")
    retriever = BM25Retriever(ds.articles)
    recalls = [len({a.id for a, _ in retriever.search(t.question, 3)} & set(t.supporting_ids)) / len(t.supporting_ids)
               for t in ds.tasks if t.answerable]
    assert np.mean(recalls) >= 0.9


@pytest.mark.parametrize("name", ["covid_faq", "xquad_en", "mtrag_un"])
def test_public_rag_loaders(name, shared_data):
    env = gym.make("RagSupport-v0", dataset=name, disable_env_checker=True)
    ds = env.unwrapped.dataset
    assert len(ds.articles) > 50 and len(ds.tasks) > 200
    obs, info = env.reset(seed=0)
    assert obs[-1]["role"] == "user" and info["retrieved_ids"]
    _, reward, terminated, *_ = env.step("I am not sure.")
    assert terminated and 0.0 <= reward <= 1.0


def test_ruler_combination_default():
    envs = gym.make_vec("RagSupportRuler-v0", num_envs=2, group_size=2, judge=judge())
    envs.reset(options={"task_ids": ["Q001"]})
    _, rewards, _, _, info = envs.step(["Unread printed books can be returned within 30 days of delivery [REF-01].",
                                        "Returns are possible within 90 days."])
    env_part = info["reward_components"]["env"]
    assert list(rewards) == pytest.approx(list(0.5 * env_part + 0.5 * np.array([0.8, 0.3])))


def test_agentic_warm_start_rows_search_then_answer_train_questions_only():
    """``--warm-start scripted:reference`` on RagSupport-v0: the reference agent searches with the
    question, then answers with the reference answer and its citations; only solved *train*
    episodes become rows (every turn one row), never a held-out question."""
    rows = RagSupportEnv.scripted_sft_rows("reference", episodes=1000, env_kwargs={"mode": "agentic"})
    train, test = RagSupportEnv(mode="agentic", split="train"), RagSupportEnv(mode="agentic", split="test")
    searches, answers = rows[0::2], rows[1::2]
    assert len(searches) == len(answers) > 0.9 * len(train.tasks)
    assert all(r["completion"].startswith('<tool_call>{"name": "search"') for r in searches)
    assert all(a["messages"][-1]["role"] == "tool" and not a["completion"].startswith("<tool_call>") for a in answers)
    shown = {r["messages"][-1]["content"] for r in searches}
    assert shown <= {t.question for t in train.tasks} and not shown & {t.question for t in test.tasks}
    # an answer row replayed through the env is correct
    task = next(t for t in train.tasks if t.question == searches[0]["messages"][-1]["content"])
    train.reset(options={"task_id": task.id})
    train.step(searches[0]["completion"])
    assert train.step(answers[0]["completion"])[4]["correct"] is True
    with pytest.raises(ValueError, match="unknown scripted policy"):
        RagSupportEnv.scripted_sft_rows("oracle", episodes=1)
