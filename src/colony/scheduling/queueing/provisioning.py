"""Auto-provisioning: the cheapest offer for a request that no colony can take now."""

from __future__ import annotations

from collections.abc import Sequence

from colony.scheduling.offers.model import Offer
from colony.scheduling.offers.solver import NoFeasibleOffer, OfferRequest, RankedOffer, cheapest_offers


class Provisioner:
    """cheapest_offers over the snapshot's catalog, memoized per request shape within a pass."""

    def __init__(self, offers: Sequence[Offer]) -> None:
        self.offers = tuple(offers)
        self.types = tuple(sorted({o.accelerator for o in self.offers}))
        """Every GPU type the catalog offers: what a request that accepts any type may get."""
        self._memo: dict[tuple[tuple[str, ...], int, int, float | None], RankedOffer | str] = {}

    def cheapest(
        self, types: Sequence[str], gpus_per_node: int, nodes: int, max_price_per_hour: float | None
    ) -> RankedOffer | str:
        """The cheapest offer for `nodes` x `gpus_per_node` GPUs of one of `types`, or why there is none."""
        key = (tuple(sorted(types)), gpus_per_node, nodes, max_price_per_hour)
        found = self._memo.get(key)
        if found is None:
            if not types:
                found = "no offer: the catalog has no GPU offers"
            else:
                try:
                    request = OfferRequest.build(
                        gpus=key[0],
                        gpus_per_node=gpus_per_node,
                        nodes=nodes,
                        max_price_per_hour=max_price_per_hour,
                    )
                    found = cheapest_offers(self.offers, request, limit=1)[0]
                except NoFeasibleOffer as e:
                    found = f"no offer: {e}"
            self._memo[key] = found
        return found
