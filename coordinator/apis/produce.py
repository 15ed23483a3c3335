"""Produce (0), v3–v8: advertised, refused.

groupd stores no records. Produce is advertised only because librdkafka enables its modern
fetcher when both Produce (≥3) and Fetch (≥4) are listed (clients.md §1.2). Every partition is
answered INVALID_REQUEST (non-retriable, so producers fail fast instead of retrying forever);
with acks=0 nothing is sent back, as Kafka does.

v5 adds the log start offset; v8 per-batch record errors and an error message.
"""

from __future__ import annotations

from protocol import ErrorCode
from protocol.apis import ApiKey
from protocol.codec import build_response

from . import Request

MESSAGE = "groupd is a group coordinator and stores no records"


def handle(node, request: Request):
    body = request.body
    if body.acks == 0:
        return None
    responses = [{"name": t.name, "partition_responses": [
        {"index": p.index, "error_code": ErrorCode.invalid_request, "base_offset": -1,
         "log_append_time": None, "log_start_offset": -1, "record_errors": (), "error_message": MESSAGE}
        for p in t.partition_data]} for t in body.topic_data]
    return build_response(ApiKey.PRODUCE, request.version, {"responses": responses})
