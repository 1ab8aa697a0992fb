"""The web console: one page (``static/``, served from the package, no CDN) and a small JSON
API over an ``Admin`` client (``views``), on an HTTP server of Python's own (``server``).
Everyone who can reach it may look; changes need a sign-in as the cluster's admin."""
