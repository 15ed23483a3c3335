"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; spec §1–§6): the group
and its members (`group`), the state machine (`machine`), its requests and replies."""
