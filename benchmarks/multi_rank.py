"""GRPO on two ranks (torch.distributed, gloo, CPU) against one: the same update, and the step time.

1. One process plays 2 GRPO steps (default model + LoRA, ``Math-v0`` level 1, 4 groups x 4) and
   records each step's rollouts; its LoRA weights after the 2 updates are the reference.
2. ``torchrun --nproc_per_node 2`` replays the recorded steps, each rank training on its own
   whole groups (``agents.distributed.rank_share``): the LoRA weights after the 2 updates must
   match the reference (max abs difference; target <= 1e-5).
3. Step time: real steps (rollouts + update) on 2 ranks against 1, reported, not targeted (on a
   2-core machine two ranks share the cores the single process used).

    python benchmarks/multi_rank.py

Ends with ``RESULT grad_max_abs_diff=<d> ranks=2 step_time_ratio=<2-rank / 1-rank>``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from rubricgym.app.flags import add_smoke_flag, results_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RESULTS = results_dir(__file__)


def config(output_dir: str, args):
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig

    return TrainConfig(env="Math-v0", env_kwargs={"levels": (1,)}, steps=args.steps, group_size=args.group_size,
                       groups_per_step=args.groups, eval_tasks=0, checkpoint_every=0, record_groups=0, report_to=(),
                       show_completions=0, seed=0, output_dir=output_dir,
                       policy=PolicyConfig(max_new_tokens=args.max_new_tokens, cpu_threads="fixed"))


def lora(trainer):
    return {name: p.detach().clone() for name, p in trainer.policy.model.named_parameters() if p.requires_grad}


def worker(mode: str, folder: str, args) -> None:
    """One rank: ``replay`` the recorded steps on this rank's groups, or ``time`` real steps."""
    import torch

    from rubricgym.agents.distributed import rank_share
    from rubricgym.agents.rollout import RolloutBatch
    from rubricgym.agents.train import Trainer

    trainer = Trainer(config(folder, args))
    if mode == "replay":
        for turns in pickle.loads((Path(folder) / "batches.pkl").read_bytes()):
            trainer.algo.update(RolloutBatch(turns=rank_share(turns, trainer.ranks)[1]))
        if trainer.ranks.main:
            torch.save(lora(trainer), Path(folder) / "two_ranks.pt")
    else:
        seconds = []
        for _ in range(args.steps):
            started = time.perf_counter()
            trainer.train_step()
            seconds.append(time.perf_counter() - started)
        if trainer.ranks.main:
            (Path(folder) / "two_rank_seconds.json").write_text(json.dumps(seconds))


def torchrun(mode: str, folder: str, argv: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(29500 + os.getpid() % 1000), __file__, "--worker", mode, "--folder", folder, *argv]
    subprocess.run(command, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--worker", choices=("replay", "time"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", default=None, help=argparse.SUPPRESS)
    add_smoke_flag(parser, steps=1, groups=2, group_size=2, max_new_tokens=4)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.folder, args)

    import torch

    from rubricgym.agents.train import Trainer

    argv = ["--steps", str(args.steps), "--groups", str(args.groups), "--group-size", str(args.group_size),
            "--max-new-tokens", str(args.max_new_tokens)]
    folder = tempfile.mkdtemp(prefix="rubricgym-multiprocess-")
    trainer = Trainer(config(folder, args))
    recorded, one_rank_seconds = [], []
    for _ in range(args.steps):  # the one-process run: real steps, timed, rollouts recorded
        started = time.perf_counter()
        batch = trainer._rollouts()
        trainer.algo.update(batch)
        trainer.step += 1
        one_rank_seconds.append(time.perf_counter() - started)
        recorded.append(batch.turns)
    reference = lora(trainer)
    del trainer
    (Path(folder) / "batches.pkl").write_bytes(pickle.dumps(recorded))
    torchrun("replay", folder, argv)
    two = torch.load(Path(folder) / "two_ranks.pt")
    diff = max(float((two[name] - value).abs().max()) for name, value in reference.items())
    torchrun("time", folder, argv)
    two_rank_seconds = json.loads((Path(folder) / "two_rank_seconds.json").read_text())
    ratio = (sum(two_rank_seconds) / len(two_rank_seconds)) / (sum(one_rank_seconds) / len(one_rank_seconds))
    print(f"one rank: {[round(s, 1) for s in one_rank_seconds]} s per step; two ranks: "
          f"{[round(s, 1) for s in two_rank_seconds]} s per step")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "multi_rank.json").write_text(json.dumps({"args": vars(args), "grad_max_abs_diff": diff,
                                                           "one_rank_seconds": one_rank_seconds,
                                                           "two_rank_seconds": two_rank_seconds,
                                                           "step_time_ratio": ratio}, indent=1))
    print(f"RESULT grad_max_abs_diff={diff:.2e} ranks=2 step_time_ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
