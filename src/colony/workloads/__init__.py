"""Resource interpretation: read any framework's custom resource through a declarative definition.

Modelled on Run:ai Karta's ResourceInterface. A `WorkloadDefinition` (a cluster-scoped custom
resource, or a data file shipped in colony/data/workload-definitions) says with jq expressions where a
kind keeps its pod templates and replica counts, how its status maps to standard phases and which
components form a gang. From it, pure functions here compute what a custom resource needs:

- `definition`: the models, loading and validation, and the `DefinitionRegistry` (built-ins plus
  user-supplied definitions);
- `demand`: pods, GPUs (and their types), CPU and memory per pod set, and a single gang request shape
  for the GPU scheduler;
- `status`: the object's standard phase (Pending, Running, Succeeded, Failed);
- `pinning`: a copy of the object with every pod template pinned to chosen nodes, and the copy
  stripped of server-set metadata for creating it in another cluster.

Nothing here does I/O except reading the shipped data files, and `sandbox`, which runs these
functions for the operator in a worker process with a time, output and memory bound (user jq
expressions must never run on the event loop: jq holds the GIL). Controllers call `sandbox`.
"""
