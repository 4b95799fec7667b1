"""Keep libraries the operator never uses out of its process.

kopf recognises the objects of every Kubernetes client library it can import: with the synchronous
`kubernetes` package installed (a dependency of the developer environment), importing kopf loads
its ~800 generated modules, about 37 MiB of the operator's resident memory, although the operator
talks to API servers only through `kubernetes_asyncio`. kopf treats a library it cannot import as
absent, so the operator marks it unimportable before kopf is first imported.
"""

from __future__ import annotations

import sys

UNUSED_BY_THE_OPERATOR = ("kubernetes",)


def keep_unused_clients_out() -> bool:
    """Make the synchronous Kubernetes client unimportable in this process (call it before kopf is
    imported). Returns False, changing nothing, when it is already loaded."""
    if any(name in sys.modules for name in UNUSED_BY_THE_OPERATOR):
        return False
    for name in UNUSED_BY_THE_OPERATOR:
        sys.modules[name] = None  # type: ignore[assignment]  # "import kubernetes" raises ImportError
    return True
