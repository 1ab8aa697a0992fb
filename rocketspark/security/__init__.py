"""Users, permissions and the request signature (``SPEC.md`` section 12, RocketMQ's ACL 2.0).

- :mod:`.signing`: credentials and the official RocketMQ 5 clients' request signature;
- :mod:`.acl`: users, policies and the decision Allow/Deny, with the store every server keeps;
- :mod:`.rules`: what each request code needs (a table: a code without a rule cannot be served);
- :mod:`.guard`: the server's check at its edge, authentication then authorization.
"""
