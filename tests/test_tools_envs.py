"""FunctionCall-v0 (BFCL AST scoring) and the sandboxed Python tool."""

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rubricgym  # noqa: F401
from rubricgym.data import load_records
from rubricgym.envs.tools.bfcl import check_calls, mutations, truth_calls
from rubricgym.sandbox import SandboxLimits, run_python


def test_bfcl_truth_accepted_and_mutations_rejected_on_every_file(shared_data):
    totals = {"truth": [0, 0], "mutations": [0, 0]}
    for path in sorted((shared_data / "bfcl_v4").glob("*.jsonl")):
        for row in load_records(path):
            if not row.get("ground_truth"):
                continue
            calls = truth_calls(row["ground_truth"])
            ok, why = check_calls(calls, row["ground_truth"], row["function"])
            assert ok, (row["id"], why)
            totals["truth"][0] += ok
            totals["truth"][1] += 1
            for kind, mutated in mutations(calls, row["function"], row["ground_truth"]).items():
                totals["mutations"][0] += not check_calls(mutated, row["ground_truth"], row["function"])[0]
                totals["mutations"][1] += 1
    print(f"\ntruth accepted {totals['truth']}, mutations rejected {totals['mutations']}")
    assert totals["truth"][0] == totals["truth"][1] > 1000
    assert totals["mutations"][0] / totals["mutations"][1] >= 0.99


@pytest.mark.parametrize("dataset", ["simple_python", "parallel", "irrelevance", "live_simple"])
def test_function_call_env(dataset, shared_data):
    env = gym.make("FunctionCall-v0", dataset=dataset)
    check_env(env.unwrapped)
    envs = gym.make_vec("FunctionCall-v0", num_envs=2, group_size=2, dataset=dataset)
    obs, info = envs.reset(seed=0)
    row = envs.unwrapped.envs[0].unwrapped.row
    truth = truth_calls(row.get("ground_truth") or [])
    good = "".join(f'<tool_call>{json.dumps({"name": n, "arguments": a})}</tool_call>' for n, a in truth) or "No function fits."
    _, rewards, terminated, _, info = envs.step([good, "I will not call anything. <tool_call>{bad json</tool_call>"])
    assert terminated.all() and rewards[0] == 1.0 and rewards[1] == 0.0
    assert info["reward_components"]["ast"][0] == 1.0


def test_function_call_warm_start_rows_are_train_rows_the_ast_check_accepts(shared_data):
    """``--warm-start scripted:reference`` on FunctionCall-v0: each train row's labelled call,
    never a held-out (test-split) row."""
    from rubricgym.envs.tools.function_call import FunctionCallEnv

    rows = FunctionCallEnv.scripted_sft_rows("reference", episodes=1000, env_kwargs={"dataset": "simple_python"})
    train = FunctionCallEnv(dataset="simple_python", split="train")
    test = FunctionCallEnv(dataset="simple_python", split="test")
    questions = lambda env: {r["question"][0][-1]["content"] for r in env.tasks}  # noqa: E731
    shown = {row["messages"][-1]["content"] for row in rows}
    assert len(rows) == len(train.tasks) == 320 and shown == questions(train) and not shown & questions(test)
    assert all(row["completion"].startswith("<tool_call>") for row in rows)
    with pytest.raises(ValueError, match="unknown scripted policy"):
        FunctionCallEnv.scripted_sft_rows("oracle", episodes=1, env_kwargs={"dataset": "simple_python"})


def test_function_call_openai_form_and_wrong_types(shared_data):
    env = gym.make("FunctionCall-v0", dataset="simple_python", disable_env_checker=True)
    env.reset(options={"task_id": "simple_python_0"})
    action = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "calculate_triangle_area", "arguments": json.dumps({"base": 10, "height": 5})}}]}
    assert env.step(action)[1] == 1.0
    env.reset(options={"task_id": "simple_python_0"})
    _, reward, terminated, _, info = env.step(12)
    assert reward == 0.0 and terminated and "got int" in info["error"]


def test_sandbox_memory_limit_and_scratch_files(bwrap):
    out, code, problem = run_python("x = bytearray(2**31)", SandboxLimits(memory_bytes=256 * 2**20))
    assert problem and "MemoryError" in out
    out, code, problem = run_python("open('a.txt', 'w').write('hi')\nprint(open('a.txt').read())")
    assert problem is None and out.strip() == "hi"
