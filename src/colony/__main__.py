"""`python -m colony` is the `colony` command."""

from colony.cli.main import app

app()
