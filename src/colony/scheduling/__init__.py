"""Pure scheduling: snapshot (queue, quotas, inventory, offers) to decisions. No I/O."""
