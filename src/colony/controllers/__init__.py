"""kopf handlers: observe, call the pure core, apply, write status. No business logic here.

Importing this package registers every handler with kopf's default registry.
"""

from colony.controllers import colony, ddpjob, gpr, gpr_scheduler, settings

__all__ = ["colony", "ddpjob", "gpr", "gpr_scheduler", "settings"]
