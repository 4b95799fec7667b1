"""Loading GPU offer catalogs (file I/O); parsing and solving are in colony.scheduling.offers."""
