"""`colony completion bash|zsh|fish`: the shell completion script, as `kubectl completion`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer


class Shell(StrEnum):
    """Shells with a completion script."""

    bash = "bash"
    zsh = "zsh"
    fish = "fish"


COMPLETE_VAR = "_COLONY_COMPLETE"


def completion(shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.", metavar="SHELL")]) -> None:
    """Print the shell completion script.

    bash: `source <(colony completion bash)` (add it to ~/.bashrc);
    zsh: `colony completion zsh > ~/.zfunc/_colony` (~/.zfunc in fpath);
    fish: `colony completion fish > ~/.config/fish/completions/colony.fish`.
    """
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="colony", complete_var=COMPLETE_VAR, shell=shell.value))
