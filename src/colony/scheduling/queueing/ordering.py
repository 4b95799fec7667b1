"""The order a pass serves pending requests in."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence

from colony.scheduling.queueing.model import GpuRequest, QueueOrder
from colony.scheduling.queueing.quota import QuotaBook


def serve_key(order: QueueOrder) -> Callable[[GpuRequest], tuple[float, float, str] | tuple[float, str]]:
    """How requests of one queue are ordered: fifo by submission; otherwise priority first."""
    if order == "fifo":
        return lambda r: (r.submitted_s, r.key)
    return lambda r: (-r.priority, r.submitted_s, r.key)


def fair_order(
    requests: Sequence[GpuRequest], book: QuotaBook, gpu_types: Sequence[str]
) -> Iterator[GpuRequest]:
    """The "default" order: priority first; at equal priority the queue whose weighted dominant share
    would be the lowest with its head admitted, FIFO within a queue; on equal shares, the earlier head.

    Counting the head (as Kueue's fair sharing does) puts a head that fits its queue's nominal quota
    before one that would borrow: after a reclaim, the owner goes before the borrower it evicted.
    A request that accepts any GPU type counts as one of `gpu_types`. `requests` must be sorted by
    serve_key("default"). Shares are recomputed when a queue is charged (QuotaBook.version): a heap
    entry whose queue was charged since is refreshed when popped (lazy update).
    """
    versions = book.version
    memo: dict[tuple[str, int, tuple[str, ...], int], float] = {}

    def share(q: str, head: GpuRequest) -> float:
        key = (q, versions.get(q, 0), head.gpu_types, head.gpus)
        found = memo.get(key)
        if found is None:
            found = memo[key] = book.share(q, head.gpu_types or gpu_types, head.gpus)
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
