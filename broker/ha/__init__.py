"""Replication inside a replica group: roles, the epoch file, log shipping and acknowledgement."""
