"""Who a query's clients are and how they connect, from the Spark options ``accessKey``,
``secretKey``, ``tls``, ``tlsCaFile``, ``tlsCertFile`` and ``tlsKeyFile``.

Travels to executors inside each partition (``reading.ReadSpec``), so it is plain frozen data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from rocketspark.errors import ConfigError, OptionError
from rocketspark.security.client_side import FIELDS, ClientSecurity, SecurityKwargs


@dataclass(frozen=True, slots=True)
class Connection:
    """Who the query's clients are and how they connect: the user they sign as and their TLS.

    Each one not set falls back to the client's environment variable on the process that
    connects (ROCKETSPARK_ACCESS_KEY...). The secret never shows in a repr; Spark redacts the
    option ``secretKey`` (and ``accessKey``) in ``EXPLAIN`` and the UI by its default
    ``spark.redaction.regex``, and the source keeps none of it in the checkpoint."""

    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool | None = None
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Connection:
        """From the parsed options (by name), checked."""
        return cls(**{f.keyword: values[f.option] for f in FIELDS}).check()

    def client_kwargs(self) -> SecurityKwargs:
        """The keywords a Producer, Consumer or Admin takes; only those set (None: the environment)."""
        given = {f.keyword: getattr(self, f.keyword) for f in FIELDS}
        return cast(SecurityKwargs, {k: v for k, v in given.items() if v is not None})

    def check(self) -> Connection:
        """Fail at the query's start, on the driver, for a half-given pair or an unreadable file."""
        if (self.access_key is None) != (self.secret_key is None):
            raise OptionError('options "accessKey" and "secretKey": set both (a user of the cluster), or neither')
        try:
            ClientSecurity.of(self.client_kwargs())
        except ConfigError as exc:
            raise OptionError(f"TLS options (tls, tlsCaFile, tlsCertFile, tlsKeyFile): {exc.message}") from None
        return self
