"""An embedded local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kwok).

Used by `make dev`, the pytest fixtures and the benchmarks. Binaries are built from the Go module
proxy by hack/build-control-plane.sh; see colony.devenv.tools.
"""
