"""The operator's process-wide limits on the memory of its API connections."""

from __future__ import annotations

import asyncio.sslproto
import os
import platform

import pytest

from colony.operator import TLS_READ_BUFFER, limit_connection_memory, trim_heap


def test_tls_read_buffer_is_small_and_malloc_returns_big_buffers() -> None:
    default = asyncio.sslproto.SSLProtocol.max_size
    try:
        took = limit_connection_memory()
        assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER < default
        assert took or platform.libc_ver()[0] != "glibc"
    finally:
        asyncio.sslproto.SSLProtocol.max_size = default


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_trimming_the_heap_gives_freed_pages_back_to_the_system() -> None:
    chunks = [bytes(1000) for _ in range(100_000)]  # ~100 MB from malloc's heap, not pymalloc
    pinned = bytes(1000)  # allocated last: the heap's top stays in use, so it cannot shrink by itself
    del chunks
    before = _rss_bytes()
    assert trim_heap()
    assert before - _rss_bytes() > 50 * 2**20
    del pinned
