"""GPU offers: the price catalog (clouds, regions, instance types, prices) and the cheapest-offer solver.

Pure code: parsing takes CSV text, the solver takes a catalog; loading files, ConfigMaps or live AWS
prices is done by colony.pricing.
"""
