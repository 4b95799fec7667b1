"""Load GPU offer catalogs: the one shipped with colony, or a user's CSV file."""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from colony.scheduling.offers.catalog import parse_catalog_csv
from colony.scheduling.offers.model import Offer

DEFAULT_CATALOG_RESOURCE = ("data", "gpu-offers.csv")
DEFAULT_CATALOG_DESCRIPTION = (
    "shipped catalog colony/data/gpu-offers.csv (SkyPilot catalog excerpt, copied 2026-12-02)"
)


@functools.lru_cache(maxsize=1)
def load_default_catalog() -> tuple[Offer, ...]:
    """The offers of the catalog shipped in the colony package (parsed once, then cached)."""
    text = resources.files("colony").joinpath(*DEFAULT_CATALOG_RESOURCE).read_text(encoding="utf-8")
    return parse_catalog_csv(text)


def load_catalog_file(path: str | os.PathLike[str]) -> tuple[Offer, ...]:
    """The offers of a catalog CSV file (same columns as the shipped one); CatalogError if malformed."""
    return parse_catalog_csv(Path(path).read_text(encoding="utf-8"))
