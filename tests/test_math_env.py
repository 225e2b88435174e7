import json
import threading
import time

import gymnasium as gym
import pytest
from conftest import require  # noqa: E402
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.data import DatasetLoadError
from judges import gold
from rubricgym.envs.math.tasks import parse_task_id
from rubricgym.envs.math import MathEnv, answers_match, extract_answer, generate_task, last_boxed

CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'


@pytest.mark.parametrize("kwargs", [{}, {"tools": ["calculator"]}, {"dataset": "gsm8k"}])
def test_check_env_passes(kwargs, shared_data):
    env = gym.make("Math-v0", **kwargs)
    check_env(env.unwrapped, skip_render_check=False)


def _reset(env, **options):
    obs, info = env.reset(seed=0, options=options or None)
    return obs, info


def test_correct_and_incorrect_outcomes_default_pm1():
    env = gym.make("Math-v0")
    obs, info = env.reset(options={"task_id": "gen-L3-test-5"})
    assert obs[0]["role"] == "system" and "\\boxed" in obs[0]["content"]
    assert obs[1] == {"role": "user", "content": generate_task(3, 5, "test").problem}
    answer = gold(info["task_id"])
    _, reward, terminated, truncated, info = env.step(f"Adding carefully gives \\boxed{{{answer}}}.")
    assert (reward, terminated, truncated, info["correct"], info["extraction"]) == (1.0, True, False, True, "boxed")
    assert info["reward_components"] == {"outcome": 1.0}
    env.reset(options={"task_id": "gen-L3-test-5"})
    _, reward, *_, info = env.step(f"\\boxed{{{int(answer) + 1}}}")
    assert reward == -1.0 and info["reward_components"] == {"outcome": -1.0}


def test_binary_rewards_format_component_and_fallback_recorded():
    env = gym.make("Math-v0", incorrect_reward=0.0, format_weight=0.5)
    _, info = env.reset(options={"task_id": "gen-L1-train-3"})
    _, reward, *_, info = env.step(f"the answer is {gold(info['task_id'])}")
    assert info["extraction"] == "last_number" and info["correct"]
    assert info["reward_components"] == {"outcome": 1.0, "format": 0.0} and reward == 1.0
    _, info = env.reset(options={"task_id": "gen-L1-train-3"})
    _, reward, *_, info = env.step("no idea")
    assert info["extraction"] == "none" and reward == 0.0
    strict = gym.make("Math-v0", answer_fallback="none")
    _, info = strict.reset(options={"task_id": "gen-L1-train-3"})
    _, reward, *_, info = strict.step(f"the answer is {gold(info['task_id'])}")
    assert reward == -1.0 and info["extraction"] == "none"


def test_same_task_id_same_scenario_and_seeded_reset():
    env = gym.make("Math-v0")
    a, ia = env.reset(seed=11)
    b, ib = env.reset(seed=11)
    assert a == b and ia["task_id"] == ib["task_id"]
    c, _ = env.reset(options={"task_id": ia["task_id"]})
    assert c == a
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "no-such-task"})


def test_calculator_multi_turn_flow():
    env = gym.make("Math-v0", tools=["calculator"], max_turns=3)
    obs, info = env.reset(options={"task_id": "gen-L4-test-0"})
    assert "calculator" in obs[0]["content"] and info["tools"][0]["function"]["name"] == "calculator"
    expression = obs[1]["content"].removeprefix("What is ").removesuffix("?")
    obs, reward, terminated, truncated, info = env.step("Let me compute." + CALC % expression)
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert obs[-1]["role"] == "tool" and obs[-1]["content"] == gold(info["task_id"])
    assert obs[-2]["tool_calls"][0]["id"] == obs[-1]["tool_call_id"]
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{obs[-1]['content']}}}")
    assert (reward, terminated, truncated) == (1.0, True, False)


def test_tool_errors_cost_a_turn_and_turn_limit_truncates():
    env = gym.make("Math-v0", tools=["calculator"], max_turns=3)
    env.reset(options={"task_id": "gen-L1-test-0"})
    obs, reward, terminated, truncated, info = env.step("<tool_call>{broken</tool_call>")
    assert not (terminated or truncated) and "not valid JSON" in info["error"]
    assert obs[-1]["role"] == "user" and obs[-1]["content"].startswith("Tool call error")
    obs, reward, terminated, truncated, info = env.step(CALC % "1/0")
    assert "division by zero" in obs[-1]["content"] and not truncated
    obs, reward, terminated, truncated, info = env.step(CALC % "1+1")
    assert truncated and not terminated and reward == -1.0
    assert info["error"] == "turn limit reached without a final answer"


def test_wrong_type_action_is_an_error_not_a_crash():
    env = gym.make("Math-v0", disable_env_checker=True)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(12345)
    assert reward == -1.0 and terminated and "got int" in info["error"]
    assert obs[-1]["content"].startswith("Error:")
    # stepping a finished episode is reported, not a crash
    obs2, reward, terminated, *_, info = env.step("\\boxed{1}")
    assert reward == 0.0 and terminated and "reset()" in info["error"]


def test_tool_call_text_without_tools_is_just_an_answer():
    env = gym.make("Math-v0")
    _, info = env.reset(options={"task_id": "gen-L1-test-0"})
    _, reward, terminated, *_ = env.step(CALC % "1+1" + f" \\boxed{{{gold(info['task_id'])}}}")
    assert terminated and reward == 1.0


def test_extraction_rules():
    assert last_boxed(r"\boxed{\frac{a}{b}} then \boxed{\{1,2\}}") == r"\{1,2\}"
    assert last_boxed(r"\boxed{unclosed and \boxed{7}") == "7"
    assert last_boxed(r"\fbox{3}") == "3" and last_boxed("none") is None
    assert extract_answer("it is 1,234.") .answer == "1,234"
    assert extract_answer("x = -3/4").answer == "-3/4"


@pytest.mark.parametrize("gold, predicted, expected", [
    ("18", "18", True), ("18", "18.0", True), ("1000", "1,000", True), ("\\frac{1}{2}", "0.5", True),
    ("\\frac{\\pi}{2}", "\\pi/2", True), ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\frac{\\pi}{2})", True),
    ("p - q", "p-q", True), ("\\text{(C)}", "C", True), ("18", "19", False), ("\\frac{1}{2}", "\\frac{1}{3}", False),
    ("x^2+1", "x^2+2", False),
])
def test_answers_match(gold, predicted, expected):
    assert answers_match(gold, predicted) is expected


def test_equivalence_off_the_main_thread_is_bounded():
    results = {}

    def worker():
        start = time.perf_counter()
        results["equal"] = answers_match("\\frac{\\pi}{4}", "\\pi/4 + 0", 5.0)
        results["hostile"] = answers_match("7", "9^{9^{9^{9^{9}}}} + y", 2.0)
        results["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=30)
    assert results["equal"] is True and results["hostile"] is False
    assert results["seconds"] < 15


def test_a_check_past_its_budget_is_undecided_not_wrong():
    """The undecided path: math-verify works on a power tower until its CPU budget runs out. The
    verdict is None, and the env scores it with the neutral reward, says so, and counts it neither
    solved nor wrong; an ordinary answer in the same env is decided as before."""
    from rubricgym.envs.math import answer_verdict

    tower = "9^{9^{9^{9^{9}}}} + y"
    assert answer_verdict("7", tower, 1.0) is None and answers_match("7", tower, 1.0) is False
    env = gym.make("Math-v0", levels=(1,), verify_timeout_s=1.0)
    _, info = env.reset(seed=0)
    _, reward, terminated, _, info = env.step(f"\\boxed{{{tower}}}")
    assert terminated and reward == 0.0 and info["reward_components"]["outcome"] == 0.0
    assert info["grading"] == "undecided" and info["correct"] is False
    _, info = env.reset(seed=0)
    _, reward, _, _, info = env.step(f"\\boxed{{{gold(info['task_id'])}}}")
    assert reward == 1.0 and info["grading"] == "decided" and info["correct"] is True


def test_the_cpu_budget_counts_cpu_not_wall_time():
    """A check's limit is CPU time: waiting (what a loaded machine does to a process) does not use it
    up, computing does; the worker survives a spent budget."""
    import statistics

    from rubricgym.timeouts import CPUTimeExceeded, TimeLimitedWorker

    worker = TimeLimitedWorker()
    try:
        assert worker.call(time.sleep, (1.5,), timeout=30, cpu_s=0.5) is None  # 1.5 s of wall, ~0 s of CPU
        with pytest.raises(CPUTimeExceeded, match="0.5 s of CPU time"):
            worker.call(statistics.variance, (range(10**8),), timeout=60, cpu_s=0.5)  # pure Python: interruptible
        assert worker.call(pow, (2, 10), timeout=30, cpu_s=0.5) == 1024  # the same worker, still serving
    finally:
        worker.close()


def test_env_works_inside_async_vector_env_workers():
    # the default (shared memory) and the pipe path both work for chat observations
    for vector_kwargs in ({}, {"shared_memory": False}):
        envs = gym.make_vec("Math-v0", num_envs=2, vectorization_mode="async", vector_kwargs=vector_kwargs,
                            tools=["calculator"], max_turns=2)
        try:
            obs, info = envs.reset(seed=3)
            assert [o[1]["content"] for o in obs] == [parse_task_id(t).problem for t in info["task_id"]]
            obs, _, terminated, _, _ = envs.step([CALC % "2+3", "Zwischenschritt → " + CALC % "1+1"])
            assert obs[0][-1]["role"] == "tool" and obs[0][-1]["content"] == "5" and obs[1][-1]["content"] == "2"
            assert obs[1][-2]["content"].startswith("Zwischenschritt →")
            assert not terminated.any()
            _, rewards, terminated, _, info = envs.step([f"\\boxed{{{gold(info['task_id'])[0]}}}", "\\boxed{\\frac{1}{0}}"])
            assert list(rewards) == [1.0, -1.0] and terminated.all()
        finally:
            envs.close()


def test_sync_vector_env():
    envs = gym.make_vec("Math-v0", num_envs=3, vectorization_mode="sync")
    _, info = envs.reset(seed=5)
    _, rewards, terminated, _, _ = envs.step([f"\\boxed{{{a}}}" for a in gold(info["task_id"])])
    assert list(rewards) == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("name, rows", [("gsm8k", 1319), ("math500", 500), ("aime2024", 30)])
def test_public_datasets_load_from_shared_data(name, rows, shared_data):
    env = MathEnv(dataset=name)
    assert len(env.tasks) == rows
    obs, info = env.reset(options={"task_id": env.tasks[0].id})
    assert obs[1]["content"] == env.tasks[0].problem and env.reference() == env.tasks[0].answer
    assert "answer" not in info  # an agent fed info cannot copy the reference


def test_dapo_math_columns_from_parquet_and_jsonl(tmp_path):
    pyarrow = require("pyarrow", "data")
    import pyarrow.parquet as pq

    rows = [
        {"data_source": "math_dapo", "prompt": [{"role": "user", "content": "Compute 6 times 7."}], "ability": "MATH",
         "reward_model": {"ground_truth": "42", "style": "rule-lean"}, "extra_info": {"index": "dapo-0"}},
        {"data_source": "math_dapo", "prompt": [{"role": "user", "content": "Compute 2 + 2."}], "ability": "MATH",
         "reward_model": {"ground_truth": "4", "style": "rule-lean"}, "extra_info": {"index": "dapo-1"}},
    ]
    pq.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "dapo.parquet")
    env = gym.make("Math-v0", dataset=str(tmp_path / "dapo.parquet"))
    obs, info = env.reset(options={"task_id": "dapo-0"})
    assert obs[1]["content"] == "Compute 6 times 7." and env.unwrapped.reference() == "42"
    assert env.step("\\boxed{42}")[1] == 1.0
    gsm_style = tmp_path / "gsm.jsonl"
    gsm_style.write_text(json.dumps({"question": "1+1?", "answer": "one plus one\n#### 2"}) + "\n")
    env = MathEnv(dataset=str(gsm_style))
    assert env.tasks[0].answer == "2" and env.tasks[0].id == f"{gsm_style}-0"


def test_bad_dataset_inputs_give_clear_errors(tmp_path):
    with pytest.raises(DatasetLoadError, match="HF_HUB_OFFLINE"):
        MathEnv(dataset="someone/some-dataset")
    with pytest.raises(DatasetLoadError, match="unknown dataset"):
        MathEnv(dataset="nonsense")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "x"}\n{oops\n')
    with pytest.raises(DatasetLoadError, match="bad.jsonl:2"):
        MathEnv(dataset=str(bad))
    no_answer = tmp_path / "no_answer.jsonl"
    no_answer.write_text('{"problem": "x"}\n')
    with pytest.raises(ValueError, match="need a problem"):
        MathEnv(dataset=str(no_answer))


def test_generator_levels_are_exact_and_deterministic():
    from rubricgym.envs.math.tasks import LEVELS

    for level in LEVELS:
        for index in range(30):
            task = generate_task(level, index, "test")
            assert task == generate_task(level, index, "test")
            int(task.answer)  # answers are exact integers by construction
            if level <= 4:
                expression = task.problem.removeprefix("What is ").removesuffix("?")
                assert eval(expression) == int(task.answer)  # noqa: S307 (our own generated text)
            if level == 6:
                a, rest = task.problem.removeprefix("Solve for x: ").split("x", 1)
                b, c = rest.rstrip(".").split("=")
                assert int(a) * int(task.answer) + int(b.replace(" ", "")) == int(c)
    assert generate_task(1, 0, "train").id != generate_task(1, 0, "test").id
