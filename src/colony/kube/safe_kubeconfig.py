"""Parse a kubeconfig the operator did not write itself, accepting only what is safe to use.

Kubeconfigs of colony clusters come from Secrets that tenants (or Cluster API) write. A general
kubeconfig loader does whatever the document says: runs `exec` plugins, reads `tokenFile` and
certificate paths from the operator's own filesystem (its service-account token among them), talks
through `proxy-url`, skips TLS verification. This parser accepts only inline credentials (a bearer
`token`, `client-certificate-data` + `client-key-data`, or `username` + `password`) and inline
`certificate-authority-data`, for an `https://` server; everything else is refused with an error
naming the field (never its value).

`allow_unsafe` (COLONY_ALLOW_UNSAFE_KUBECONFIGS, for an operator whose kubeconfig Secrets are
written only by its admins) additionally allows `proxy-url` and `insecure-skip-tls-verify`. It
never allows what acts inside the operator's pod or reads its files: `exec` and `auth-provider`
plugins run code or call identity providers with the operator's environment, and a file path can
only name a file of the operator (nothing of the tenant's is there), so those stay refused, as do
a plain `http://` server (credentials in clear text) and fields this parser does not know.

Pure: no I/O; kube.config turns the result into a client.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

UNSAFE_SETTING = "COLONY_ALLOW_UNSAFE_KUBECONFIGS"

_CLUSTER_FIELDS = frozenset(
    {"server", "certificate-authority-data", "tls-server-name", "disable-compression", "extensions"}
)
_USER_FIELDS = frozenset(
    {"token", "client-certificate-data", "client-key-data", "username", "password", "extensions"}
)
_CONTEXT_FIELDS = frozenset({"cluster", "user", "namespace", "extensions"})
_OPT_IN = {
    "proxy-url": "a proxy-url sends the cluster's traffic through another server",
    "insecure-skip-tls-verify": "insecure-skip-tls-verify turns off verification of the server's certificate",
}
_NEVER = {
    "exec": "exec plugins run a command inside the operator",
    "auth-provider": "auth-provider plugins run inside the operator",
    "tokenFile": "file paths would read the operator's own files; use token",
    "client-certificate": "file paths would read the operator's own files; use client-certificate-data",
    "client-key": "file paths would read the operator's own files; use client-key-data",
    "certificate-authority": "file paths would read the operator's own files; use certificate-authority-data",
}


def yaml_error_position(error: BaseException) -> str:
    """` (line N)` for a YAML error that knows where it happened, else "". A YAML error's own text
    quotes the offending lines: for a kubeconfig, that is a token or a key, so only the position
    may go into a status or a log."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    line = getattr(mark, "line", None)
    return f" (line {line + 1})" if isinstance(line, int) else ""


class KubeconfigError(ValueError):
    """A kubeconfig the operator cannot use; `field` names the offending field (never its value)."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field} {why}")
        self.field = field


class RefusedKubeconfigField(KubeconfigError):
    """A kubeconfig field the operator refuses to act on (exec, file paths, proxy-url...)."""


@dataclass(frozen=True)
class KubeconfigCredentials:
    """What a client needs from the current context of a kubeconfig; secrets are kept out of repr."""

    server: str
    ca_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    client_cert: bytes | None = field(default=None, repr=False)
    client_key: bytes | None = field(default=None, repr=False)
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    tls_server_name: str | None = None
    proxy_url: str | None = None
    insecure_skip_tls_verify: bool = False


def parse_kubeconfig(document: Any, *, allow_unsafe: bool = False) -> KubeconfigCredentials:
    """The credentials of `document`'s current context; KubeconfigError (RefusedKubeconfigField for a
    field that is not allowed) otherwise."""
    if not isinstance(document, Mapping):
        raise KubeconfigError("the kubeconfig", "is not a YAML mapping")
    current = document.get("current-context")
    if not isinstance(current, str) or not current:
        raise KubeconfigError("current-context", "is missing")
    context = _named(document, "contexts", "context", current)
    _only(context, _CONTEXT_FIELDS, {}, "context", allow_unsafe)
    cluster_name = context.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise KubeconfigError("context.cluster", "is missing")
    cluster = _named(document, "clusters", "cluster", cluster_name)
    user_name = context.get("user")
    user: Mapping[str, Any] = {}
    if user_name:
        if not isinstance(user_name, str):
            raise KubeconfigError("context.user", "is not a string")
        user = _named(document, "users", "user", user_name)
    _only(cluster, _CLUSTER_FIELDS, _OPT_IN, "cluster", allow_unsafe)
    _only(user, _USER_FIELDS, {}, "user", allow_unsafe)

    server = _string(cluster, "server", "cluster")
    if server is None:
        raise KubeconfigError("cluster.server", "is missing")
    parts = urlsplit(server)
    if parts.scheme != "https" or not parts.hostname:
        raise RefusedKubeconfigField(
            "cluster.server",
            "is refused: it must be an https:// URL (credentials are never sent in clear text)",
        )
    proxy = _string(cluster, "proxy-url", "cluster")
    if proxy is not None and urlsplit(proxy).scheme not in ("http", "https"):
        raise KubeconfigError(
            "cluster.proxy-url", "must be an http:// or https:// URL (the only proxies supported)"
        )
    insecure = cluster.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError("cluster.insecure-skip-tls-verify", "is not true or false")

    cert = _data(user, "client-certificate-data", "user")
    key = _data(user, "client-key-data", "user")
    if (cert is None) != (key is None):
        raise KubeconfigError(
            "user.client-key-data", "must come with client-certificate-data, and the other way round"
        )
    username, password = _string(user, "username", "user"), _string(user, "password", "user")
    if (username is None) != (password is None):
        raise KubeconfigError("user.password", "must come with username, and the other way round")
    return KubeconfigCredentials(
        server=server.rstrip("/"),
        ca_data=_data(cluster, "certificate-authority-data", "cluster"),
        token=_string(user, "token", "user"),
        client_cert=cert,
        client_key=key,
        username=username,
        password=password,
        tls_server_name=_string(cluster, "tls-server-name", "cluster"),
        proxy_url=proxy,
        insecure_skip_tls_verify=insecure,
    )


def _named(document: Mapping[str, Any], section: str, inner: str, name: str) -> Mapping[str, Any]:
    """`document[section][i][inner]` of the entry called `name`."""
    entries = document.get(section)
    if not isinstance(entries, list):
        raise KubeconfigError(section, "is missing or not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(inner)
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise KubeconfigError(f"{section}.{inner}", "is not a mapping")
            return value
    raise KubeconfigError(section, f"has no entry the current context names as its {inner}")


def _only(
    section: Mapping[str, Any],
    allowed: frozenset[str],
    opt_in: Mapping[str, str],
    where: str,
    allow_unsafe: bool,
) -> None:
    """Refuse every field of `section` outside `allowed` (and `opt_in` when allowed)."""
    for key in sorted(section, key=str):
        name = f"{where}.{key!s}"
        if key in allowed:
            continue
        if key in _NEVER:
            raise RefusedKubeconfigField(name, f"is refused: {_NEVER[key]}")
        if key in opt_in:
            if key == "insecure-skip-tls-verify" and section.get(key) is False:
                continue
            if not allow_unsafe:
                raise RefusedKubeconfigField(
                    name, f"is refused: {opt_in[key]} (allowed only with {UNSAFE_SETTING}=true)"
                )
            continue
        raise RefusedKubeconfigField(name[:100], "is refused: not a field the operator supports")


def _string(section: Mapping[str, Any], key: str, where: str) -> str | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{where}.{key}", "is not a non-empty string")
    return value


def _data(section: Mapping[str, Any], key: str, where: str) -> bytes | None:
    encoded = _string(section, key, where)
    if encoded is None:
        return None
    try:
        return base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"{where}.{key}", "is not valid base64") from None


def minimal_kubeconfig(credentials: KubeconfigCredentials) -> dict[str, Any]:
    """A kubeconfig holding exactly `credentials` and nothing else (one context, inline data only),
    for tools that take only a kubeconfig file (helm): what they read is what the safe parser
    accepted, never the tenant's document."""
    cluster: dict[str, Any] = {"server": credentials.server}
    if credentials.ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(credentials.ca_data).decode()
    if credentials.tls_server_name is not None:
        cluster["tls-server-name"] = credentials.tls_server_name
    if credentials.proxy_url is not None:
        cluster["proxy-url"] = credentials.proxy_url
    if credentials.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    user: dict[str, Any] = {}
    if credentials.token is not None:
        user["token"] = credentials.token
    if credentials.client_cert is not None and credentials.client_key is not None:
        user["client-certificate-data"] = base64.b64encode(credentials.client_cert).decode()
        user["client-key-data"] = base64.b64encode(credentials.client_key).decode()
    if credentials.username is not None and credentials.password is not None:
        user["username"], user["password"] = credentials.username, credentials.password
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "colony", "cluster": cluster}],
        "users": [{"name": "colony", "user": user}],
        "contexts": [{"name": "colony", "context": {"cluster": "colony", "user": "colony"}}],
        "current-context": "colony",
    }
