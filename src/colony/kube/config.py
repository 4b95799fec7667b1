"""Async API clients for the management cluster (the operator's own credentials) and for colony
clusters (from kubeconfig dicts, through the safe parser, loaded from memory)."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from colony.kube.safe_kubeconfig import KubeconfigCredentials, KubeconfigError, parse_kubeconfig
from colony.kube.timeouts import bound_requests

CONNECTIONS = 32
"""Requests a client has in flight at once (the library's default is 5 per CPU): the GPR scheduler
admits and releases many requests concurrently, each a few sequential writes."""
READ_BUFFER = 2**21
"""aiohttp's read buffer, as kubernetes_asyncio sets it (watch events of large objects exceed the default)."""
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


async def api_client_from_kubeconfig(kubeconfig: Any, *, allow_unsafe: bool = False) -> client.ApiClient:
    """An ApiClient for the current context of a kubeconfig the operator did not write (a dict, as
    read from a Secret), through the safe parser: inline credentials only, https only, no plugins,
    no file paths (see kube.safe_kubeconfig); nothing is written to disk.

    Raises safe_kubeconfig.KubeconfigError (RefusedKubeconfigField for a refused field) naming the
    field, never its value.
    """
    credentials = parse_kubeconfig(kubeconfig, allow_unsafe=allow_unsafe)
    ssl_context = ssl_context_from_memory(credentials)
    configuration = client.Configuration()
    configuration.host = credentials.server
    configuration.tls_server_name = credentials.tls_server_name
    configuration.proxy = credentials.proxy_url
    configuration.verify_ssl = not credentials.insecure_skip_tls_verify
    if credentials.token is not None:
        configuration.api_key["BearerToken"] = f"Bearer {credentials.token}"
    elif credentials.username is not None and credentials.password is not None:
        basic = base64.b64encode(f"{credentials.username}:{credentials.password}".encode()).decode()
        configuration.api_key["BearerToken"] = f"Basic {basic}"
    configuration.connection_pool_maxsize = CONNECTIONS
    api = make_api_client(configuration)  # the operator's usual client (request bounds included)
    # The library's REST client builds its TLS context from file paths only (ssl_ca_cert, cert_file,
    # key_file: its kubeconfig loader writes inline data to temp files that nobody deletes). Its
    # session is replaced by one on the context built in memory above; the library's own session
    # has opened no connection yet. Only the session is replaced: wrappers of rest.request stay.
    rest = api.rest_client
    unused = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=ssl_context),
        trust_env=any(os.environ.get(name) for name in PROXY_VARIABLES),
        read_bufsize=READ_BUFFER,
    )
    await unused.close()
    return api


def ssl_context_from_memory(credentials: KubeconfigCredentials) -> ssl.SSLContext:
    """The TLS context for `credentials`: CA and client certificate loaded from memory.

    KubeconfigError naming the field when a certificate or key cannot be loaded.
    """
    field = "cluster.certificate-authority-data"
    cadata = None if credentials.ca_data is None else _pem_text(credentials.ca_data, field)
    try:
        context = ssl.create_default_context(cadata=cadata)  # the system's CAs when there is none
    except ssl.SSLError:
        raise KubeconfigError(field, "holds a certificate that cannot be loaded") from None
    if credentials.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credentials.client_cert is not None and credentials.client_key is not None:
        _load_client_certificate(context, credentials.client_cert, credentials.client_key)
    return context


def _pem_text(data: bytes, field: str) -> str:
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KubeconfigError(field, "is not PEM text") from None
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise KubeconfigError(field, "holds no PEM certificate")
    return text


def _load_client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a client certificate and key into `context` without leaving them on disk.

    ssl's load_cert_chain reads only from a path. The PEM goes into an anonymous in-memory file
    (memfd_create: RAM only, no name in any filesystem, gone when its one descriptor is closed) and
    is loaded through /proc/self/fd/N. Where memfd or /proc is missing (not Linux), it goes into a
    file that only this process can read, in a fresh private directory, removed right after
    loading, whatever happens.
    """
    pem = cert.rstrip(b"\n") + b"\n" + key
    try:
        try:
            fd = os.memfd_create("colony-client-cert", os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            _load_via_private_file(context, pem)
            return
        try:
            _write_all(fd, pem)
            path = f"/proc/self/fd/{fd}"
            if not os.path.exists(path):
                _load_via_private_file(context, pem)
                return
            context.load_cert_chain(path)
        finally:
            os.close(fd)
    except ssl.SSLError:
        raise KubeconfigError(
            "user.client-certificate-data", "the client certificate and key cannot be loaded or do not match"
        ) from None


def _load_via_private_file(context: ssl.SSLContext, pem: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="colony-cert-") as directory:  # mode 0700
        path = os.path.join(directory, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, pem)
        finally:
            os.close(fd)
        context.load_cert_chain(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def default_api_client() -> client.ApiClient:
    """In-cluster service account when running in a pod, else $KUBECONFIG / ~/.kube/config."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        await config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = CONNECTIONS
    return make_api_client(configuration)
