"""The operator's process-wide limits on the memory of its API connections."""

from __future__ import annotations

import asyncio.sslproto
import platform

from colony.operator import TLS_READ_BUFFER, limit_connection_memory


def test_tls_read_buffer_is_small_and_malloc_returns_big_buffers() -> None:
    default = asyncio.sslproto.SSLProtocol.max_size
    try:
        took = limit_connection_memory()
        assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER < default
        assert took or platform.libc_ver()[0] != "glibc"
    finally:
        asyncio.sslproto.SSLProtocol.max_size = default
