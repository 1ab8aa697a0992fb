"""What a query is told when the cluster refuses it, and the sink's check at its start.

A query against a cluster with security on must fail when it starts, on the driver, with a
sentence that says which options to set, never deep inside an executor's task. The source
checks when it first looks up its topics (``catalog.Catalog``); the sink looks up its topic
here before any task runs.
"""

from __future__ import annotations

from rocketspark.client.admin import Admin
from rocketspark.errors import AuthenticationError, ConnectError, NoPermissionError, NoRouteInfoError
from rocketspark.spark.options import WriterOptions


def refused(exc: NoPermissionError, nameservers: tuple[str, ...], what: str) -> NoPermissionError:
    """``exc`` (raised by a server) in the terms of the query's options."""
    where = ", ".join(nameservers)
    if isinstance(exc, AuthenticationError):
        hint = (
            'set the options "accessKey" and "secretKey" to a user of the cluster (or ROCKETSPARK_ACCESS_KEY and '
            "ROCKETSPARK_SECRET_KEY on the driver and every executor)"
        )
    else:
        hint = "give that user the permission (rocketspark admin acl set), or run the query as another user"
    return type(exc)(f"the cluster at {where} refused this query's {what} ({exc.message}): {hint}")


def unreachable(exc: ConnectError, nameservers: tuple[str, ...]) -> ConnectError:
    """Kept a TlsError when it is one: the fix is a TLS option, not the address."""
    return type(exc)(
        f'cannot reach the nameserver given by option "nameserver" ({", ".join(nameservers)}): {exc.message}'
    )


def check_sink(options: WriterOptions) -> None:
    """Look up the sink's topic as the query's user, on the driver: missing or bad credentials,
    wrong TLS options, a wrong address, or a user with no right on the topic at all fail the
    query before any task runs. A route lookup needs any of Pub, Sub or Get, so a user that may
    read the topic but not write it passes here, and its first task fails with ``user "..."
    lacks Pub on Topic:...``. A topic that does not exist yet is no error here (a send may
    create it)."""
    if options.topic is None:
        return  # topics come from a column: the first send checks
    kwargs = options.connection.client_kwargs()
    try:
        with Admin(list(options.nameservers), route_push=False, **kwargs) as admin:
            admin.routes.get(options.topic)
    except NoRouteInfoError:  # how the route cache reports a topic that does not exist
        return
    except NoPermissionError as exc:
        raise refused(exc, options.nameservers, f'writes to topic "{options.topic}"') from None
    except ConnectError as exc:
        raise unreachable(exc, options.nameservers) from None
