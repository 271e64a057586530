"""Scheduler-side security: role ACLs and tenant/node identity binding (docs/security.md)."""
