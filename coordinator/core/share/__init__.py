"""Share groups (KIP-932): membership, the simple assignor, the share-group records."""
