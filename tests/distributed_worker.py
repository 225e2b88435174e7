"""One rank of the multi-process tests (run under torchrun, or alone as the 1-rank run).

    python tests/distributed_worker.py replay BATCHES OUT   # GRPO updates from recorded rollouts
    python tests/distributed_worker.py tasks OUT             # one step of real rollouts: this rank's task ids
"""

import json
import os
import pickle
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def trainer_config(output_dir: str, groups_per_step: int = 2):
    from rubricgym.agents.policy import PolicyConfig
    from rubricgym.agents.train import TrainConfig

    config = TrainConfig(env="Math-v0", env_kwargs={"levels": (1,)}, steps=2, group_size=2, groups_per_step=groups_per_step,
                         eval_tasks=0, checkpoint_every=0, record_groups=0, report_to=(), show_completions=0, seed=0,
                         output_dir=output_dir, policy=PolicyConfig(max_new_tokens=8, cpu_threads="fixed"))
    # one micro-batch per group on one rank as on two: the same passes, so the same floating-point
    # sums (with several groups per pass, noise-level gradients can change sign, and Adam's first
    # step turns a sign into a full learning-rate move)
    config.grpo.micro_batch_size = config.group_size
    return config


def lora_state(trainer) -> dict:
    return {name: p.detach().clone() for name, p in trainer.policy.model.named_parameters() if p.requires_grad}


def replay(batches_path: str, out: str) -> None:
    """Every recorded step's groups split across the ranks (whole groups), one update each."""
    import torch

    from rubricgym.agents.distributed import rank_share
    from rubricgym.agents.rollout import RolloutBatch
    from rubricgym.agents.train import Trainer

    recorded = pickle.loads(open(batches_path, "rb").read())
    trainer = Trainer(trainer_config(os.path.dirname(out)))
    ranks = trainer.ranks
    received = []
    for turns in recorded:
        mine, share = rank_share(turns, ranks)
        received.append(mine)
        trainer.algo.update(RolloutBatch(turns=share))
    if ranks.main:
        torch.save(lora_state(trainer), out)
    with open(f"{out}.rank{ranks.rank}.json", "w") as handle:
        json.dump({"groups": received, "world": ranks.world}, handle)


def tasks(out: str) -> None:
    """One real step: which tasks (and how many members of each) this rank played."""
    from rubricgym.agents.train import Trainer

    trainer = Trainer(trainer_config(os.path.dirname(out), groups_per_step=4))
    trainer.train_step()
    groups = {}
    for group in trainer.last_batch.groups:
        groups[group.task_id] = len(group.trajectories)
    with open(f"{out}.rank{trainer.ranks.rank}.json", "w") as handle:
        json.dump({"groups": groups, "world": trainer.ranks.world}, handle)


if __name__ == "__main__":
    {"replay": replay, "tasks": tasks}[sys.argv[1]](*sys.argv[2:])
