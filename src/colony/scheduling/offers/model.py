"""The offer record shared by the catalog, the solver, the AWS price refresh and the provisioning hook."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Offer:
    """One way to rent one GPU node: an instance type in a region (or zone) of a cloud, with its prices.

    Prices are USD per hour for the whole node; None where the catalog has no price (e.g. no spot
    market for that type there). `accelerator` is the canonical GPU name (see gpu_names).
    """

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    accelerator: str
    accelerator_count: int
    vcpus: float | None
    memory_gib: float | None
    price_per_hour: float | None
    spot_price_per_hour: float | None

    def price(self, spot: bool) -> float | None:
        """The hourly price of one node with the given pricing kind (None: not offered that way)."""
        return self.spot_price_per_hour if spot else self.price_per_hour
