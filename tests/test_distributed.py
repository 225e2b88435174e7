"""Multi-process GRPO with torch.distributed (gloo on CPU), launched by torchrun as users do."""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _free_port, require

pytestmark = pytest.mark.slow
require("peft", "agents")

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "distributed_worker.py")


def torchrun(*args: str, ranks: int = 2, timeout: int = 900) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(HERE)}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
               "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]


def test_two_ranks_make_the_one_rank_lora_update_from_the_same_groups(tmp_path):
    import torch

    sys.path.insert(0, str(HERE))
    from distributed_worker import lora_state, trainer_config

    from rubricgym.agents.train import Trainer

    # the one-process run: 2 steps of 2 groups x 2 (real rollouts), recorded. One torch thread, as
    # torchrun gives each rank: Adam turns a near-zero gradient's rounding (which thread counts
    # change) into a full +-lr step, 1.5e-4 here with two threads against one
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = Trainer(trainer_config(str(tmp_path)))
        recorded = []
        for _ in range(2):
            batch = trainer._rollouts()
            for turn in batch.turns:  # 8-token answers rarely score: give each group's two members different rewards
                turn.reward = float(turn.env_index % 2)
            recorded.append(batch.turns)
            trainer.algo.update(batch)
            trainer.step += 1
    finally:
        torch.set_num_threads(threads)
    assert all(len({t.group for t in turns}) == 2 for turns in recorded)
    reference = lora_state(trainer)
    (tmp_path / "batches.pkl").write_bytes(pickle.dumps(recorded))

    torchrun(WORKER, "replay", str(tmp_path / "batches.pkl"), str(tmp_path / "two_ranks.pt"))
    two = torch.load(tmp_path / "two_ranks.pt")
    diff = max(float((two[name] - value).abs().max()) for name, value in reference.items())
    moved = max(float((value - 0).abs().max()) for name, value in reference.items() if "lora_B" in name)
    assert moved > 0 and diff <= 1e-5, (diff, moved)  # B starts at 0: the update is real, and the same
    received = [json.loads((tmp_path / f"two_ranks.pt.rank{r}.json").read_text()) for r in (0, 1)]
    for step in range(2):  # each rank one whole group, together all of them
        assert received[0]["groups"][step] == [0] and received[1]["groups"][step] == [1]
    assert received[0]["world"] == received[1]["world"] == 2


def test_ranks_play_disjoint_whole_groups_the_one_process_run_would_play(tmp_path):
    from rubricgym.agents.evaluation import make_envs

    torchrun(WORKER, "tasks", str(tmp_path / "tasks"))
    played = [json.loads((tmp_path / f"tasks.rank{r}.json").read_text())["groups"] for r in (0, 1)]
    assert all(len(groups) == 2 and set(groups.values()) == {2} for groups in played)  # 2 whole groups of 2 each
    assert not set(played[0]) & set(played[1])
    envs = make_envs("Math-v0", num_envs=8, group_size=2, kwargs={"levels": (1,)})
    _, info = envs.reset(seed=0)  # the one-process step 0 of seed 0
    one_process = set(info["task_id"])
    envs.close()
    assert set(played[0]) | set(played[1]) == one_process


def test_a_resumed_two_rank_run_continues_exactly(tmp_path):
    from safetensors.torch import load_file

    def train(out: Path, steps: int, *extra: str) -> None:
        torchrun("-m", "rubricgym.app.cli", "train", "--env", "Math-v0", "--env-kwargs", '{"levels": [1]}', "--steps", str(steps),
                 "--group-size", "2", "--groups-per-step", "2", "--max-new-tokens", "8", "--eval-tasks", "0",
                 "--checkpoint-every", "1", "--record-groups", "0", "--report-to", "none", "--cpu-threads", "fixed",
                 "--output-dir", str(out), *extra)

    train(tmp_path / "straight", 2)
    train(tmp_path / "resumed", 1)
    train(tmp_path / "resumed", 2, "--resume")
    adapter = "checkpoint-2/adapter/adapter_model.safetensors"
    straight, resumed = load_file(str(tmp_path / "straight" / adapter)), load_file(str(tmp_path / "resumed" / adapter))
    assert max(float((straight[k] - resumed[k]).abs().max()) for k in straight) == 0.0
    rows = [json.loads(line) for line in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]  # rank 0 alone writes metrics; the resumed step is not doubled
    assert all(r["groups"] == 2 for r in rows)  # stats summed over both ranks' groups
