"""Pure rendering: models to manifests (Cluster API per provider, add-ons, training workloads). No I/O."""
