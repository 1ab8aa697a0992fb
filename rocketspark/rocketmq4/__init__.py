"""The RocketMQ 4.x dialect: what RocketMQ's own clients and tools (Java rocketmq-client, the
Go and C++ clients, ali-ons, mqadmin) send on the remoting port, and how it is answered.

Its wire pieces live here (codes, the MessageExt records, routes, headers); the servers'
handlers that translate each request into ours are ``nameserver.rocketmq4`` and
``broker.rocketmq4``.
"""
