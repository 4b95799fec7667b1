"""Build hook: with COLONY_COMPILE=1 the scheduler core is compiled to C by mypyc (the container image
and `make bench` do this); a plain install, editable ones included, stays pure Python."""

import os
from pathlib import Path

from setuptools import setup

COMPILED = sorted(
    str(p)
    for p in Path("src/colony/scheduling/queueing").glob("*.py")
    # objects.py converts Kubernetes objects and rules.py applies per-request rules (visibility):
    # not hot, and they import pydantic models, which an isolated wheel build does not have
    if p.name not in {"__init__.py", "objects.py", "rules.py"}
)

ext_modules = []
if os.environ.get("COLONY_COMPILE") == "1":
    from mypyc.build import mypycify

    ext_modules = mypycify(COMPILED, opt_level="3")

setup(ext_modules=ext_modules)
