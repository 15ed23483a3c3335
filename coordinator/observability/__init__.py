"""What the process shows: metric series and the state collector, event log lines, readiness.
Must not import the server, the runtime or the API handlers."""
