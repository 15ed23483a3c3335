"""The error a confluent-kafka call fails with, without keeping the client alive.

Not `pytest.raises`: its ExceptionInfo, the exception's traceback and the test's frame form a cycle (and a
future keeps the exception it raised), so the frames' locals, the test's AdminClient among them, live until
a full garbage collection. Meanwhile that client retries its stopped server's port, logging `Connect to
ipv4#127.0.0.1:N failed: Connection refused` over later tests for minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException


def kafka_error(call: Callable[[], Any]) -> KafkaError:
    """The KafkaError `call()` raises; the test fails if it returns."""
    try:
        call()
    except KafkaException as e:
        e.__traceback__ = None  # the frames it holds (and their clients) go with this call
        return e.args[0]
    pytest.fail("the call succeeded; a KafkaException was expected")
