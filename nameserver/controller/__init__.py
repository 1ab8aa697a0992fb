"""The replica-group controller, inside the nameservers (RocketMQ 5's controller mode).

Per replica group (the brokers sharing a ``broker_name``) it keeps the replicas, the master,
the master epoch and the SyncStateSet, agreed by Raft among the nameservers through
pysyncobj; it elects a new master from the SyncStateSet when the master's heartbeats lapse.

    state      the replicated state and its rules (pure, deterministic: Raft replays it)
    liveness   heartbeats as this nameserver saw them (local, never replicated)
    election   what the Raft leader's scan decides
    raft       the state behind pysyncobj: replicated commands, persistence, status
    service    the requests (BROKER_HEARTBEAT, CONTROLLER_*) and the election scan
"""
