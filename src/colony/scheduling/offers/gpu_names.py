"""Canonical GPU names, so that catalog rows, requests and node labels compare equal.

Rules of `normalize_gpu`, in order:

1. Case does not matter; the result is upper case.
2. ' ', '_' and '-' are the same separator; the result joins words with '-' (runs of separators
   count as one; leading and trailing ones are dropped).
3. Vendor words are dropped: "NVIDIA", "Tesla" (so "Tesla V100" and "NVIDIA-V100" are "V100").
4. Form-factor words are dropped, since the catalog does not tell them apart: "SXM", "SXM2" ... "SXM6",
   "PCIe", "HBM3", "HBM3e" (so the node label "NVIDIA-A100-SXM4-80GB" is "A100-80GB").
5. A memory word ("80GB", "80G", "80GiB", or "80" followed by "GB") is kept, as a "-<N>GB" suffix
   after the other words, ONLY where it differs from the default variant's memory:
   A100 = 40 GB, V100 = 16 GB, H100 = 80 GB, H200 = 141 GB, A10 / A10G / L4 = 24 GB, T4 = 16 GB,
   L40S = 48 GB. So "A100-40GB" is "A100", "a100 80gb" and "A100_80G" are "A100-80GB",
   "V100-32GB" stays, "H100-80GB" is "H100". A model without a default keeps its memory word.
6. A few spellings of one product are aliases: "RTX 6000" / "Quadro RTX 6000" are "RTX6000",
   "RTX A6000" is "A6000".

Everything else is kept: "H100-MEGA" (GCP's A3 Mega GPU) differs from "H100", "A10G" (AWS) from
"A10", and L4, L40S, T4, K80, H200, B200, GH200, A6000, RTX6000 are simply upper-cased. An unknown
name is not an error: it gets the same treatment (rules 1-5) and is its own canonical name.
"""

from __future__ import annotations

import re

VENDOR_WORDS = frozenset({"NVIDIA", "TESLA"})
FORM_FACTOR_WORDS = frozenset({"SXM", "SXM2", "SXM3", "SXM4", "SXM5", "SXM6", "PCIE", "HBM3", "HBM3E"})
DEFAULT_MEMORY_GB: dict[str, int] = {
    "A100": 40,
    "V100": 16,
    "H100": 80,
    "H200": 141,
    "A10": 24,
    "A10G": 24,
    "L4": 24,
    "T4": 16,
    "L40S": 48,
}
ALIASES: dict[str, str] = {
    "RTX-6000": "RTX6000",
    "QUADRO-RTX-6000": "RTX6000",
    "QUADRO-RTX6000": "RTX6000",
    "RTX-A6000": "A6000",
}

_SEPARATORS = re.compile(r"[\s_\-]+")
_MEMORY_WORD = re.compile(r"^(\d+)(?:GB|G|GIB)$")
_MEMORY_UNITS = frozenset({"GB", "G", "GIB"})


def _words(name: str) -> list[str]:
    words = [w for w in _SEPARATORS.split(name.strip().upper()) if w]
    merged: list[str] = []
    for word in words:
        if word in _MEMORY_UNITS and merged and merged[-1].isdigit():
            merged[-1] += "GB"
        else:
            merged.append(word)
    return [w for w in merged if w not in VENDOR_WORDS and w not in FORM_FACTOR_WORDS]


def normalize_gpu(name: str) -> str:
    """The canonical name of a GPU type (see the module docstring for the rules)."""
    model: list[str] = []
    memory: int | None = None
    for word in _words(name):
        match = _MEMORY_WORD.match(word)
        if match and model:
            memory = int(match.group(1))
        else:
            model.append(word)
    base = "-".join(model)
    base = ALIASES.get(base, base)
    if memory is None or DEFAULT_MEMORY_GB.get(base.split("-")[0]) == memory:
        return base
    return f"{base}-{memory}GB"
