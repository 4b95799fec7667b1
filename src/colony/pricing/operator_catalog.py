"""The offer catalog the operator prices colonies with: the shipped snapshot, or the user's override.

Settings (environment of the operator process, set by the Helm chart's values):
- COLONY_OFFERS_CSV: path of a CSV with the catalog's columns (e.g. a mounted file);
- COLONY_OFFERS_CONFIGMAP: `namespace/name` of a ConfigMap whose key `gpu-offers.csv` holds it.
The override replaces the shipped catalog. A missing or malformed override is logged as an error and
the shipped catalog is used, so a typo never stops the operator. Read once, at startup.
"""

from __future__ import annotations

import logging
import os

from colony.kube.resources import Kube
from colony.pricing.catalog_source import load_catalog_file, load_default_catalog
from colony.scheduling.offers.catalog import CatalogError, parse_catalog_csv
from colony.scheduling.offers.model import Offer

CSV_SETTING = "COLONY_OFFERS_CSV"
CONFIGMAP_SETTING = "COLONY_OFFERS_CONFIGMAP"
CONFIGMAP_KEY = "gpu-offers.csv"

log = logging.getLogger(__name__)


async def load_operator_catalog(kube: Kube) -> tuple[Offer, ...]:
    """The catalog named by the settings, else the shipped snapshot."""
    try:
        if path := os.environ.get(CSV_SETTING):
            offers = load_catalog_file(path)
            log.info("offer catalog: %d offers from %s", len(offers), path)
            return offers
        if reference := os.environ.get(CONFIGMAP_SETTING):
            offers = await _from_configmap(kube, reference)
            log.info("offer catalog: %d offers from ConfigMap %s", len(offers), reference)
            return offers
    except (OSError, CatalogError, ValueError) as error:
        log.error("offer catalog override unusable (%s); using the shipped catalog", error)
    return load_default_catalog()


async def _from_configmap(kube: Kube, reference: str) -> tuple[Offer, ...]:
    namespace, _, name = reference.partition("/")
    if not namespace or not name:
        raise ValueError(f"{CONFIGMAP_SETTING}={reference!r} is not namespace/name")
    configmap = await kube.get("v1", "ConfigMap", name, namespace)
    if configmap is None:
        raise ValueError(f"ConfigMap {reference} does not exist")
    text = (configmap.get("data") or {}).get(CONFIGMAP_KEY)
    if text is None:
        raise ValueError(f"ConfigMap {reference} has no key {CONFIGMAP_KEY}")
    return parse_catalog_csv(text)
