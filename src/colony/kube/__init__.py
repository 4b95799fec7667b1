"""Kubernetes I/O helpers: clients for the management cluster and each colony, apply, watches."""
