"""Async API clients for the management cluster and for colony clusters (from kubeconfig dicts)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client, config

from colony.kube.timeouts import bound_requests

_TEMP_DIR = tempfile.mkdtemp(prefix="colony-kubeconfig-")
CONNECTIONS = 32
"""Requests a client has in flight at once (the library's default is 5 per CPU): the GPR scheduler
admits and releases many requests concurrently, each a few sequential writes."""
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def make_api_client(configuration: client.Configuration) -> client.ApiClient:
    """An ApiClient that reads proxy settings and ~/.netrc from the environment only when a proxy
    is set there: kubernetes_asyncio's session trusts the environment, which makes aiohttp read
    ~/.netrc in a worker thread on every request (a tenth of the operator's CPU under load).
    Every request is time-bounded (kube/timeouts.py)."""
    api = bound_requests(client.ApiClient(configuration))
    if not any(os.environ.get(name) for name in PROXY_VARIABLES):
        api.rest_client.pool_manager._trust_env = False  # no public setter in aiohttp
    return api


async def api_client_from_kubeconfig(kubeconfig: Mapping[str, Any]) -> client.ApiClient:
    """An ApiClient for the current context of a kubeconfig given as a dict.

    Raises config.ConfigException (or ValueError/KeyError/TypeError) for a broken kubeconfig.
    """
    configuration = client.Configuration()
    await config.load_kube_config_from_dict(
        dict(kubeconfig), client_configuration=configuration, temp_file_path=_TEMP_DIR
    )
    configuration.connection_pool_maxsize = CONNECTIONS
    return make_api_client(configuration)


async def default_api_client() -> client.ApiClient:
    """In-cluster service account when running in a pod, else $KUBECONFIG / ~/.kube/config."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = CONNECTIONS
    return make_api_client(configuration)
