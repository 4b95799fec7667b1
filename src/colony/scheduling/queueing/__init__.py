"""The GPU request scheduler: queue order, quotas with borrowing, DRF, backfill, gang placement,
preemption, auto-provisioning and wait-time estimates, decided in one pass over an immutable snapshot.

Pure: `schedule(snapshot) -> Decisions`; the GPR controller builds snapshots from watches and applies
the decisions, and `colony simulate` replays traces through the same function with simulated time.
"""
