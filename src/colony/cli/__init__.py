"""The `colony` command line."""
