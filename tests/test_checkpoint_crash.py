"""kill -9 at random points while checkpoints are written: what ``latest`` finds is complete."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from rubricgym.agents.checkpoints import latest_checkpoint

WRITER = textwrap.dedent("""
    import sys, types
    from pathlib import Path
    import torch
    from rubricgym.agents.checkpoints import save_checkpoint

    model = torch.nn.Linear(1500, 1500)  # 9 MB of weights: a save takes a while
    policy = types.SimpleNamespace(has_adapter=False, model=model)
    out = Path(sys.argv[1])
    for step in range(1, 10_000):
        with torch.no_grad():
            model.bias.fill_(step)  # each checkpoint's weights say which step wrote them
        save_checkpoint(out, step, policy, {"algo": {}, "history": [{"step": step}]}, {"step": step})
        print(step, flush=True)
""")


@pytest.mark.slow
def test_kill_minus_nine_while_saving_never_leaves_a_broken_latest(tmp_path):
    rng = random.Random(0)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / "run"
    resumed_steps = []
    for trial in range(6):
        writer = subprocess.Popen([sys.executable, str(script), str(out)], stdout=subprocess.PIPE, text=True)
        writer.stdout.readline()  # at least one save finished in this trial
        time.sleep(rng.uniform(0.0, 0.6))
        writer.kill()  # SIGKILL: no cleanup runs
        writer.wait()
        folder = latest_checkpoint(out)
        assert folder is not None
        state = torch.load(folder / "trainer.pt", weights_only=False)
        weights = torch.load(folder / "model.pt")
        config = json.loads((folder / "config.json").read_text())
        step = int(folder.name.split("-")[-1])
        assert state["step"] == step == config["step"] == int(weights["bias"][0]) == state["history"][-1]["step"]
        for other in out.glob("checkpoint-*"):  # every visible checkpoint is complete
            assert (other / "trainer.pt").is_file() and (other / "model.pt").is_file()
        resumed_steps.append(step)
    assert len(set(resumed_steps)) > 1  # the kills landed at different points
