"""Pure: observed objects (Cluster API status, nodes, Helm releases) to the status we report. No I/O."""
