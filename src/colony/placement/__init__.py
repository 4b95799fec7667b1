"""Placement of framework custom resources (PyTorchJob, RayJob, JobSet, any kind with a
WorkloadDefinition) from the management cluster onto colonies: the pure part.

- `names`: labels, annotations, the finalizer and the names of the GPU requests;
- `selection`: which object a PlacementPolicy (or the opt-in label) selects, and its group;
- `candidates`: the colonies an object may go to (visible, Ready, selected, serving its CRD) and why
  the others may not;
- `requests`: the GPU Provisioning Request of each object or group (summed demand);
- `decide`: what to do for one object now (finalizer, GPU request, copy in the colony, status
  mirror, release, rescheduling), as a list of actions for the controller to apply;
- `duplicate`: the same for an object a policy spreads (mode Duplicate): a GPU request and a copy
  per eligible colony, the copies' phases summarised on the original.

Nothing here does I/O; colony.controllers.placement reads the clusters and applies the actions.
"""
