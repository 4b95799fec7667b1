"""The GPR scheduling loop: observe → snapshot → `schedule()` → apply, once a second or on a change.

One concern per module, in the order a pass runs them (`loop.run_pass` lists the steps):

- `state`: what the loop keeps between passes (`SchedulerState`, one per OperatorContext: wake-up
  event, parse cache, requests seen and deleted, admissions finishing in the background, informers);
- `world`: the read (informers or lists; nodes and pods of the colony clusters in play, under one
  deadline) and what a pass asks of it (a request's queue and candidate colonies);
- `writes`: status writes onto the version read (recomputed after a 409), the finalizer, Events,
  bounded concurrency;
- `accept`: specs validated in bulk;
- `release`: GPUs given back (due, deleted, finalizers, usage, ephemeral colony teardown);
- `reconcile`: colony reachability, reservation labels, orphaned ephemeral colonies;
- `reservations`: node reservation labels and finishing admissions (Admitted → labels → Ready);
- `snapshot`: the World turned into the core's Snapshot;
- `apply`: the core's Decisions applied (preempt, admit, provision);
- `report`: metrics, GPUQueue usage, queue positions and wait estimates;
- `loop`: the kopf handlers, the loop and `run_pass`.

Every step takes the operator's OperatorContext (colony.controllers.context) explicitly: its
clients, catalog and settings (read once at startup), and its `scheduler` state; the kopf handlers
in `loop` take it from kopf's memo once (`context_of`). The pure rules they apply live in
`colony.scheduling` (`queueing.rules`, `queueing.objects`, `fault_rules`, `visibility`). Every
decision is written to the request's status before anything else is done for it, so a crash
anywhere is finished or redone by a later pass; status is the source of truth for allocations.

Importing `loop` (colony.controllers does) registers the loop's kopf handlers (startup, cleanup,
GPUQueue events). The package itself imports none of its modules: `colony.controllers.context`
imports `state`, and loading the loop from here would import the context from within itself.
"""
