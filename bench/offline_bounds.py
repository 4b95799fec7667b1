"""How low can the average wait on a small trace go? Reference points for docs/gprs-and-queues.md.

On a pool of GPUs (exact for a one-node cluster such as tiresias-60 on 1 x 8), with the whole trace
known in advance:

- fluid: a lower bound for every schedule, preemptive or not: one machine G times as fast, shortest
  remaining GPU time first, no gangs (a job's completion is at least its submission + duration);
- list orders: simulated annealing over priority lists, each job started in list order as early as
  it fits (every non-preemptive schedule whose starts follow one order is one such list): the best
  found is a schedule a clairvoyant, non-preemptive scheduler could run.

    .venv/bin/python -m bench.offline_bounds tests/data/traces/tiresias-60.csv 8

Not part of `python -m bench` (a one-off analysis, about a minute). On tiresias-60: FIFO 1,378 s,
fluid bound 196 s, best list order found 299 s (a time-indexed LP relaxation gives only 161 s).
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
from pathlib import Path

from colony.simulate.trace import TraceJob, load_trace


def fluid_bound(jobs: list[TraceJob], gpus: int) -> float:
    """Average wait lower bound: preemptive SRPT on GPU time on a machine of speed `gpus`."""
    order = sorted(range(len(jobs)), key=lambda k: jobs[k].submit_time_s)
    left: dict[int, float] = {}
    done: dict[int, float] = {}
    now, i = 0.0, 0
    while i < len(order) or left:
        if not left:
            now = max(now, jobs[order[i]].submit_time_s)
        while i < len(order) and jobs[order[i]].submit_time_s <= now:
            k = order[i]
            left[k] = jobs[k].gpus * jobs[k].duration_s
            i += 1
        k = min(left, key=lambda j: (left[j], j))
        arrival = jobs[order[i]].submit_time_s if i < len(order) else math.inf
        finish = now + left[k] / gpus
        if finish <= arrival:
            now = done[k] = finish
            del left[k]
        else:
            left[k] -= (arrival - now) * gpus
            now = arrival
    waits = [max(done[k] - j.submit_time_s - j.duration_s, 0.0) for k, j in enumerate(jobs)]
    return math.fsum(waits) / len(jobs)


def list_schedule(jobs: list[TraceJob], gpus: int, order: list[int]) -> float:
    """Average wait when jobs start in `order` (a later one never before an earlier one), each as
    early as it has arrived and fits."""
    free, now, total = gpus, 0.0, 0.0
    ends: list[tuple[float, int]] = []
    for k in order:
        job = jobs[k]
        now = max(now, job.submit_time_s)
        while ends and (ends[0][0] <= now or free < job.gpus):
            end, held = heapq.heappop(ends)
            now = max(now, end)
            free += held
        free -= job.gpus
        total += now - job.submit_time_s
        heapq.heappush(ends, (now + job.duration_s, job.gpus))
    return total / len(jobs)


def anneal(jobs: list[TraceJob], gpus: int, steps: int, seed: int = 1) -> float:
    """The least average wait found over list orders, from shortest GPU time first."""
    rng = random.Random(seed)
    current = sorted(range(len(jobs)), key=lambda k: (jobs[k].gpus * jobs[k].duration_s, k))
    value = best = list_schedule(jobs, gpus, current)
    temperature = 50.0
    for _ in range(steps):
        a, b = rng.sample(range(len(jobs)), 2)
        candidate = current[:]
        candidate.insert(b, candidate.pop(a))
        found = list_schedule(jobs, gpus, candidate)
        if found < value or rng.random() < math.exp(-(found - value) / temperature):
            current, value = candidate, found
            best = min(best, value)
        temperature *= 0.9999
    return best


def main() -> None:
    """Print FIFO, shortest GPU time first and the two reference points for a trace."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("gpus", type=int)
    parser.add_argument("--steps", type=int, default=200_000, help="annealing steps per seed")
    parser.add_argument("--seeds", type=int, default=6, help="annealing runs (the best is printed)")
    args = parser.parse_args()
    jobs = list(load_trace(args.trace))
    fifo = list_schedule(jobs, args.gpus, sorted(range(len(jobs)), key=lambda k: jobs[k].submit_time_s))
    print(f"FIFO (list in submission order): {fifo:.0f} s")
    print(f"fluid lower bound: {fluid_bound(jobs, args.gpus):.0f} s")
    found = min(anneal(jobs, args.gpus, args.steps, seed) for seed in range(1, args.seeds + 1))
    print(f"best list order found: {found:.0f} s")


if __name__ == "__main__":
    main()
