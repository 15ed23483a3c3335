"""Fault injection: the faults an operator arms through the admin endpoint and how they answer."""
