"""The order a pass serves pending requests in."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter

from colony.scheduling.queueing.model import GpuRequest, QueueOrder
from colony.scheduling.queueing.quota import QuotaBook


def serve_order(requests: Iterable[GpuRequest], order: QueueOrder) -> list[GpuRequest]:
    """Requests in the order one queue serves them: fifo by (submitted_s, key); otherwise priority
    first (highest), then (submitted_s, key)."""
    # stable sorts on one plain key each: faster than one sort on tuples (a tenth of a 10k pass)
    ranked = sorted(requests, key=attrgetter("key"))
    ranked.sort(key=attrgetter("submitted_s"))
    if order != "fifo":
        ranked.sort(key=attrgetter("priority"), reverse=True)
    return ranked


def fair_order(
    requests: Sequence[GpuRequest], book: QuotaBook, gpu_types: Sequence[str]
) -> Iterator[GpuRequest]:
    """The "default" order: priority first; at equal priority the queue whose weighted dominant share
    would be the lowest with its head admitted, FIFO within a queue; on equal shares, the earlier head.

    Counting the head (as Kueue's fair sharing does) puts a head that fits its queue's nominal quota
    before one that would borrow: after a reclaim, the owner goes before the borrower it evicted.
    A request that accepts any GPU type counts as one of `gpu_types`. `requests` must be sorted by
    serve_order(..., "default"). Shares are recomputed when a queue is charged (QuotaBook.version): a heap
    entry whose queue was charged since is refreshed when popped (lazy update).
    """
    versions = book.version
    last: dict[str, tuple[int, tuple[str, ...], int, float]] = {}
    """Per queue, the share last computed: (queue version, head GPU types, head GPUs, share)."""

    def share(q: str, head: GpuRequest) -> float:
        version = versions.get(q, 0)
        seen = last.get(q)
        if seen is not None and seen[0] == version and seen[2] == head.gpus and seen[1] == head.gpu_types:
            return seen[3]
        found = book.share(q, head.gpu_types or gpu_types, head.gpus)
        last[q] = (version, head.gpu_types, head.gpus, found)
        return found

    i = 0
    while i < len(requests):
        priority = requests[i].priority
        by_queue: dict[str, list[GpuRequest]] = {}
        while i < len(requests) and requests[i].priority == priority:
            by_queue.setdefault(requests[i].queue, []).append(requests[i])
            i += 1
        if len(by_queue) == 1:
            yield from next(iter(by_queue.values()))
            continue
        heap = [
            (share(q, b[0]), b[0].submitted_s, b[0].key, q, 0, versions.get(q, 0))
            for q, b in by_queue.items()
        ]
        heapq.heapify(heap)
        while heap:
            _, _, _, q, pos, version = heapq.heappop(heap)
            batch = by_queue[q]
            if version != versions.get(q, 0):
                head = batch[pos]
                heapq.heappush(heap, (share(q, head), head.submitted_s, head.key, q, pos, versions.get(q, 0)))
                continue
            end = len(batch)
            while True:
                yield batch[pos]
                pos += 1
                if pos == end:
                    break
                if not heap:
                    continue
                head = batch[pos]
                mine = share(q, head)
                # stay on this queue while it still comes first (saves a pop and a push)
                top = heap[0]
                if mine > top[0] or (mine == top[0] and (head.submitted_s, head.key) > (top[1], top[2])):
                    heapq.heappush(heap, (mine, head.submitted_s, head.key, q, pos, versions.get(q, 0)))
                    break
