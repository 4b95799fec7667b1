"""The GPU price catalog: CSV text to `Offer`s and back.

Columns: `cloud,instance_type,accelerator,accelerator_count,vcpus,memory_gib,price_per_hour,
spot_price_per_hour,region,zone` (the SkyPilot catalog's, see colony/data/gpu-offers.SOURCE.md).
Other columns are ignored. A row is one of:

- a complete offer (`instance_type` and `accelerator` set): any cloud, and what `catalog_to_csv`
  writes, so its output parses back to the same offers;
- a GCP host row (`instance_type` set, `accelerator` empty): the VM shell only. It is combined with
  the GCP GPU row of the same region (the same zone if there is one) named by `GCP_HOST_GPUS`, and
  both prices are added per pricing kind (None if either is None); the offer's zone is the host's.
  A host type missing from `GCP_HOST_GPUS`, or without its GPU row in the region, gives no offer;
- a GCP GPU row (`instance_type` empty, `accelerator` set): N attached GPUs, only used through a
  host row. T4 and V100 GPU rows attach to N1 hosts, which the shipped catalog does not have, so
  they cannot form complete offers and are dropped, as is any GPU row no host row names.

Rows of other clouds with no accelerator or a count of 0 are skipped. `ERRATA` corrects known
errors of the source. Malformed rows raise `CatalogError` with their line number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

from colony.scheduling.offers.gpu_names import normalize_gpu
from colony.scheduling.offers.model import Offer

COLUMNS = (
    "cloud",
    "instance_type",
    "accelerator",
    "accelerator_count",
    "vcpus",
    "memory_gib",
    "price_per_hour",
    "spot_price_per_hour",
    "region",
    "zone",
)
GCP = "gcp"


def _gcp_host_gpus() -> dict[str, tuple[str, int]]:
    table: dict[str, tuple[str, int]] = {
        "a2-megagpu-16g": ("A100", 16),
        "a3-edgegpu-8g": ("H100", 8),
        "a3-edgegpu-8g-nolssd": ("H100", 8),
        "a3-megagpu-8g": ("H100-MEGA", 8),
        "a3-ultragpu-8g": ("H200", 8),
        "a3-ultragpu-8g-nolssd": ("H200", 8),
        "g2-standard-24": ("L4", 2),
        "g2-standard-48": ("L4", 4),
        "g2-standard-96": ("L4", 8),
    }
    for count in (1, 2, 4, 8):
        table[f"a2-highgpu-{count}g"] = ("A100", count)
        table[f"a2-ultragpu-{count}g"] = ("A100-80GB", count)
        table[f"a3-highgpu-{count}g"] = ("H100", count)
    for vcpus in (4, 8, 12, 16, 32):
        table[f"g2-standard-{vcpus}"] = ("L4", 1)
    return table


GCP_HOST_GPUS: Mapping[str, tuple[str, int]] = _gcp_host_gpus()
"""GCP host machine type -> (GPU type, count) of the GPU row to add (Google's machine-type definitions)."""


@dataclass(frozen=True)
class Erratum:
    """A known error of the source catalog and its correction."""

    cloud: str
    instance_type: str
    accelerator_count: int
    reason: str


ERRATA: tuple[Erratum, ...] = (
    Erratum(
        "azure",
        "Standard_ND96isr_H100_v5",
        8,
        "the source says 12 GPUs; the ND H100 v5 VM has 8 H100s (Azure's VM size documentation)",
    ),
)


class CatalogError(ValueError):
    """A malformed catalog; `line` is the 1-based CSV line of the offending row (None: not one row)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


@dataclass(frozen=True)
class _Row:
    line: int
    cells: Mapping[str, str]

    def text(self, column: str) -> str:
        return self.cells[column].strip()

    def number(self, column: str) -> float | None:
        value = self.decimal(column)
        return None if value is None else float(value)

    def decimal(self, column: str) -> Decimal | None:
        text = self.text(column)
        if not text:
            return None
        try:
            value = Decimal(text)
        except InvalidOperation:
            raise CatalogError(f"{column} is not a number: {text!r}", self.line) from None
        if not value.is_finite() or value < 0:
            raise CatalogError(f"{column} must be a finite number >= 0, not {text!r}", self.line)
        return value

    def count(self) -> int:
        value = self.number("accelerator_count")
        if value is None:
            return 0
        if not value.is_integer():
            raise CatalogError(f"accelerator_count is not a whole number: {value}", self.line)
        return int(value)

    def check(self) -> None:
        """Raise CatalogError unless the region is set and every number parses."""
        self.required("region")
        self.count()
        for column in ("vcpus", "memory_gib", "price_per_hour", "spot_price_per_hour"):
            self.decimal(column)

    def required(self, column: str) -> str:
        value = self.text(column)
        if not value:
            raise CatalogError(f"{column} is empty", self.line)
        return value


def _rows(text: str) -> list[_Row]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise CatalogError("the catalog is empty (no header line)", 1)
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise CatalogError(f"missing column(s): {', '.join(missing)}", 1)
    rows = []
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise CatalogError(f"{len(cells)} cells, expected {len(header)}", reader.line_num)
        rows.append(_Row(reader.line_num, dict(zip(header, cells, strict=True))))
    return rows


def _offer(row: _Row, *, zone: str | None = None) -> Offer:
    return Offer(
        cloud=row.required("cloud").lower(),
        region=row.required("region"),
        zone=zone if zone is not None else row.text("zone") or None,
        instance_type=row.required("instance_type"),
        accelerator=normalize_gpu(row.text("accelerator")),
        accelerator_count=row.count(),
        vcpus=row.number("vcpus"),
        memory_gib=row.number("memory_gib"),
        price_per_hour=row.number("price_per_hour"),
        spot_price_per_hour=row.number("spot_price_per_hour"),
    )


def _sum(a: Decimal | None, b: Decimal | None) -> float | None:
    return None if a is None or b is None else float(a + b)


def _gcp_offer(host: _Row, gpu_rows: Sequence[_Row]) -> Offer | None:
    gpu_type, count = GCP_HOST_GPUS.get(host.required("instance_type"), ("", 0))
    region, zone = host.required("region"), host.text("zone")
    matches = [
        g
        for g in gpu_rows
        if g.text("region") == region
        and g.count() == count
        and normalize_gpu(g.text("accelerator")) == gpu_type
    ]
    if not matches:
        return None
    gpu = next((g for g in matches if g.text("zone") == zone), matches[0])
    return replace(
        _offer(host),
        accelerator=gpu_type,
        accelerator_count=count,
        price_per_hour=_sum(host.decimal("price_per_hour"), gpu.decimal("price_per_hour")),
        spot_price_per_hour=_sum(host.decimal("spot_price_per_hour"), gpu.decimal("spot_price_per_hour")),
    )


def _apply_errata(offer: Offer) -> Offer:
    for erratum in ERRATA:
        if (offer.cloud, offer.instance_type) == (erratum.cloud, erratum.instance_type):
            return replace(offer, accelerator_count=erratum.accelerator_count)
    return offer


def parse_catalog_csv(text: str) -> tuple[Offer, ...]:
    """The offers of a catalog CSV, in row order (GCP offers where their host row is).

    Raises CatalogError, with the line number, on a missing column or a malformed row.
    """
    rows = _rows(text)
    is_gcp = [r.required("cloud").lower() == GCP for r in rows]
    gpu_rows = [r for r, gcp in zip(rows, is_gcp, strict=True) if gcp and not r.text("instance_type")]
    offers: list[Offer] = []
    for row, gcp in zip(rows, is_gcp, strict=True):
        row.check()
        has_instance, has_gpu = bool(row.text("instance_type")), bool(row.text("accelerator"))
        if gcp and not has_gpu:
            offer = _gcp_offer(row, gpu_rows)
        elif gcp and not has_instance:
            offer = None
        else:
            offer = _offer(row)
            if not has_gpu or offer.accelerator_count == 0:
                offer = None
        if offer is not None:
            offers.append(_apply_errata(offer))
    return tuple(offers)


def _cell(value: str | float | int | None) -> str:
    return "" if value is None else str(value)


def catalog_to_csv(offers: Iterable[Offer]) -> str:
    """CSV text of offers, one complete-offer row each, with the columns `parse_catalog_csv` reads."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for o in offers:
        writer.writerow(
            _cell(v)
            for v in (
                o.cloud,
                o.instance_type,
                o.accelerator,
                o.accelerator_count,
                o.vcpus,
                o.memory_gib,
                o.price_per_hour,
                o.spot_price_per_hour,
                o.region,
                o.zone,
            )
        )
    return out.getvalue()
