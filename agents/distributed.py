"""Training across processes with torch.distributed: whole groups split across ranks, gradients
of the trained parameters summed, metrics and checkpoints from rank 0.

Launch ``rubricgym train`` under ``torchrun --nproc_per_node N`` (or ``accelerate launch
--num_processes N``: both set ``RANK`` / ``WORLD_SIZE`` / ``MASTER_ADDR``); a plain run is one
rank and touches nothing here. CPU ranks use gloo, CUDA ranks NCCL (one GPU per rank,
``LOCAL_RANK``). Each rank plays ``groups_per_step / N`` whole groups, the ones a single process
would have played at those group indices (the env seeds groups by index), so a group's members
never straddle ranks and GRPO's group baseline stays exact. Every loss term is normalised by the
*global* token / sequence counts, so summing the ranks' gradients gives the one-process gradient
(tests/test_distributed.py: max abs difference of the LoRA update <= 1e-5).

    torchrun --nproc_per_node 2 -m rubricgym.app.cli train --env Math-v0 --groups-per-step 4
    (on CPU: ``accelerate launch --cpu --num_processes 2`` starts a single process; use torchrun)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

import torch


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run (``world == 1``: a plain single-process run)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1


def setup() -> Ranks:
    """Join the process group the launcher describes (no-op without ``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Ranks()
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend=backend)
    return Ranks(dist.get_rank(), dist.get_world_size())


def local_groups(groups_per_step: int, ranks: Ranks) -> int:
    """Groups each rank plays per step (whole groups only)."""
    if groups_per_step % ranks.world:
        raise ValueError(f"groups_per_step ({groups_per_step}) must be a multiple of the number of ranks ({ranks.world}): "
                         "each rank plays whole groups, so GRPO's group baselines never straddle processes")
    return groups_per_step // ranks.world


def sum_scalar(value: float, ranks: Ranks) -> float:
    """``value`` summed over ranks."""
    if not ranks.active:
        return value
    import torch.distributed as dist

    tensor = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(tensor)
    return float(tensor.item())


def sum_gradients(parameters: Sequence[torch.nn.Parameter], ranks: Ranks) -> None:
    """Sum the gradients over ranks in one flat buffer (a rank with no samples sends zeros)."""
    if not ranks.active:
        return
    import torch.distributed as dist

    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    offset = 0
    for parameter, grad in zip(parameters, grads):
        parameter.grad = flat[offset:offset + grad.numel()].view_as(grad).clone()
        offset += grad.numel()


def broadcast_parameters(parameters: Sequence[torch.nn.Parameter], ranks: Ranks) -> None:
    """Every rank starts from rank 0's weights (a LoRA init drawn elsewhere would diverge)."""
    if not ranks.active:
        return
    import torch.distributed as dist

    with torch.no_grad():
        for parameter in parameters:
            dist.broadcast(parameter.data, src=0)


def gather(value: Any, ranks: Ranks) -> list[Any]:
    """One picklable value per rank, in rank order (on every rank)."""
    if not ranks.active:
        return [value]
    import torch.distributed as dist

    out: list[Any] = [None] * ranks.world
    dist.all_gather_object(out, value)
    return out


def teardown(ranks: Ranks) -> None:
    """Leave the process group at the end of a run."""
    if ranks.active:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def barrier(ranks: Ranks) -> None:
    if ranks.active:
        import torch.distributed as dist

        dist.barrier()


def rank_share(turns: Sequence[Any], ranks: Ranks) -> tuple[list[int], list[Any]]:
    """This rank's whole groups of a recorded step (by group index, as the trainer splits them):
    the group indices and their turns. Replaying a one-process batch this way on N ranks must
    give the one-process update (tests/test_distributed.py, benchmarks/multi_rank.py)."""
    groups = sorted({t.group for t in turns})
    share = len(groups) // ranks.world
    mine = groups[ranks.rank * share:(ranks.rank + 1) * share]
    return mine, [t for t in turns if t.group in mine]


#: per-step stats that add up over ranks (the rest are averaged)
SUMMED_STATS = frozenset({"completion_tokens", "trained_completions", "groups", "zero_variance_groups",
                          "judge_failed_groups", "loss", "kl"})


def combine_stats(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """One row of step stats from every rank's: counts summed, means averaged, ``step`` kept."""
    if len(per_rank) == 1:
        return per_rank[0]
    combined: dict[str, float] = {}
    for key in dict.fromkeys(k for stats in per_rank for k in stats):
        values = [stats[key] for stats in per_rank if key in stats]
        if key == "step":
            combined[key] = values[0]
        elif key in SUMMED_STATS:
            combined[key] = float(sum(values))
        else:
            combined[key] = float(sum(values) / len(values))
    return combined
