"""Every label and annotation key the operator writes or reads, in one place.

A leaf module (no imports): the pure layers (scheduling, render, status, placement) and the I/O
layers share these names, so a key is spelled once and a grep for it finds every user.
"""

from __future__ import annotations

# Objects rendered for a colony (owner references stay in-namespace; these cross clusters).
COLONY_LABEL = "colony.exalsius.ai/colony"
CLUSTER_LABEL = "colony.exalsius.ai/cluster"
ADDON_LABEL = "colony.exalsius.ai/addon"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "colony-operator"
PLACEMENT_ORDER_ANNOTATION = "colony.exalsius.ai/placement-order"
"""On a Colony: its rank for the `ordered` placement strategy (lower first)."""

# Helm releases the operator installs on existing clusters.
HELM_OWNER_LABEL = "colony.exalsius.ai/colony-uid"
HELM_SPEC_LABEL = "colony.exalsius.ai/addon-spec"

# GPU provisioning requests.
RESERVATION_PREFIX = "gpr.colony.exalsius.ai/"
"""Node labels `<prefix><hash of namespace/name>` = GPUs reserved there for one request."""
FOR_GPR_LABEL = "colony.exalsius.ai/for-gpr"
"""On an ephemeral Colony: the uid of the request it was provisioned for."""
FOR_GPR_NAME_ANNOTATION = "colony.exalsius.ai/for-gpr-name"
"""On an ephemeral Colony: namespace/name of that request (for people; the label is the key)."""
EPHEMERAL_LABEL = "colony.exalsius.ai/ephemeral"
"""On a Colony made for one job or request: torn down when no longer used."""
TEARDOWN_GRACE_ANNOTATION = "colony.exalsius.ai/teardown-grace-seconds"

# DDPJob worker pods.
JOB_LABEL = "training.exalsius.ai/job-name"
ATTEMPT_LABEL = "training.exalsius.ai/attempt"
RANK_LABEL = "training.exalsius.ai/replica-index"

# Framework objects placed on colonies (annotation keys are PLACEMENT_PREFIX + name).
PLACEMENT_PREFIX = "placement.exalsius.ai/"

# kopf's bookkeeping on the kinds it handles.
FINALIZER = "colony.exalsius.ai/finalizer"
LAST_HANDLED_ANNOTATION = "colony.exalsius.ai/last-handled-configuration"
