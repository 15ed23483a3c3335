"""Consumer groups (KIP-848): the pure building blocks the consumer-group machine calls."""
