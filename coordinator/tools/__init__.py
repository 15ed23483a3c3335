"""The operator commands behind `groupd groups|acls|offsets|chaos|config`: Kafka clients of a running
server. Must not import the server, the runtime or the core."""
