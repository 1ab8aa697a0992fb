"""The transport error a client connection raises when it ends: the peer closed it, or this
client did (:mod:`rocketspark.remoting.failures` words it for the user)."""

from __future__ import annotations


class Closed(ConnectionError):
    """The connection ended (the peer closed it, or it was closed here)."""
