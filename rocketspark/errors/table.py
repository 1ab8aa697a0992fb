"""The code-to-class table, built from the classes, and the two translations made with it: a
response's code (and the server's class name) into an exception, on the client
(``CodeTable.error_for_response``), and an exception's details into a response's ext, on the
server (``wire_details``). :mod:`rocketspark.errors` builds the table once, after importing
every class, so no class is missed."""

from __future__ import annotations

from typing import Any

from rocketspark.errors.base import RocketSparkError


class CodeTable:
    """Every subclass of ``root`` by name, and by code every subclass of ``fallback``: the class
    of a non-success response whose code no subclass has."""

    def __init__(self, root: type[RocketSparkError], fallback: type[RocketSparkError]) -> None:
        self.fallback = fallback
        self.by_code: dict[int, type[RocketSparkError]] = {}
        for cls in _all_subclasses(fallback):
            # The most general class of a code wins; subclasses sharing it are chosen by name.
            self.by_code.setdefault(cls.code, cls)
        self.by_name = {cls.__name__: cls for cls in _all_subclasses(root)}

    def error_for_response(
        self, code: int, remark: str, error_name: str | None = None, ext: dict[str, Any] | None = None
    ) -> RocketSparkError:
        """The exception a client raises for a non-success response.

        ``error_name`` is the server's exception class name (sent in the response's ext); it picks
        a more specific subclass of the code's class when there is one. The class's
        ``wire_details`` found in ``ext`` become the error's ``details``.
        """
        base = self.by_code.get(code, self.fallback)
        if error_name:
            named = self.by_name.get(error_name)
            if named is not None and issubclass(named, base) and named.code == code:
                base = named
        found = ext or {}
        err = base(
            remark or f"request failed with response code {code}",
            **{key: found[key] for key in base.wire_details if key in found},
        )
        if base is self.fallback:
            err.details["code"] = code
        return err


def wire_details(exc: RocketSparkError) -> dict[str, Any]:
    """What of ``exc``'s details a server sends in its response's ext."""
    return {key: exc.details[key] for key in type(exc).wire_details if key in exc.details}


def _all_subclasses(cls: type[RocketSparkError]) -> list[type[RocketSparkError]]:
    out: list[type[RocketSparkError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out
