"""A tiny DDP training script: proves that every rank joined ONE process group and trained together.

Run it the way a DDPJob runs its script, under torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK,
GROUP_RANK and the store address):

    torchrun --nnodes=2 --nproc-per-node=2 --node-rank=0 --rdzv-backend=c10d \
        --rdzv-endpoint=HOST:29500 --rdzv-id=ID examples/ddp_smoke_train.py --out-dir /tmp/ddp

Each rank
1. all-reduces `rank + 1` (the sum over a world of N ranks must be N*(N+1)/2),
2. trains a linear model y = 3x + 1 with DistributedDataParallel on its own shard of the data
   (gloo backend, CPU), so gradients are averaged across all ranks at every step,
3. checks that its final parameters equal those of every other rank (all-gathered), and
4. writes rank-<RANK>.json with what it saw into --out-dir (when given) and prints it.

Any mismatch raises, so the process (and torchrun) exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def _shard(rank: int, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the data set: different x per rank, the same law y = 3x + 1."""
    generator = torch.Generator().manual_seed(1000 + rank)
    x = torch.rand(samples, 1, generator=generator) * 2 - 1
    return x, 3 * x + 1


def _train(rank: int, steps: int) -> tuple[torch.Tensor, float]:
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = _shard(rank, samples=64)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        optimizer.step()
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    return params, float(loss)


def main() -> None:
    """Join the process group, check all_reduce, train, compare parameters, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out-dir", type=Path, default=None)
    args = parser.parse_args()

    started = time.monotonic()
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    if total.item() != expected:
        raise RuntimeError(f"rank {rank}: all_reduce gave {total.item()}, expected {expected}")

    params, loss = _train(rank, args.steps)
    gathered = [torch.zeros_like(params) for _ in range(world)]
    dist.all_gather(gathered, params)
    if not all(torch.equal(params, other) for other in gathered):
        raise RuntimeError(f"rank {rank}: parameters differ across ranks: {[g.tolist() for g in gathered]}")

    report = {
        "rank": rank,
        "world_size": world,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "node_rank": int(os.environ["GROUP_RANK"]),
        "all_reduce": total.item(),
        "weight": params[0].item(),
        "bias": params[1].item(),
        "loss": loss,
        "seconds": round(time.monotonic() - started, 3),
    }
    print(json.dumps(report), flush=True)
    if args.out_dir is not None:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / f"rank-{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Everything is checked and written: leave without the interpreter's finalization, where gloo's
    # C++ worker threads can still die with SIGABRT ("terminate called without an active exception",
    # pytorch/pytorch#179291) and turn a verified run into a failed one for torchrun.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
