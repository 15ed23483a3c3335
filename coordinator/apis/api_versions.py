"""ApiVersions (18), v0–v4.

v1 adds throttle time; v3 is flexible and carries the client's software name and version
(validated like Kafka: an invalid one gets INVALID_REQUEST); v4 changes nothing on the wire.
The response never carries the tagged feature fields: librdkafka < 2.2 cannot skip them.
A version above ours is answered as v0 with UNSUPPORTED_VERSION and the table (KIP-511).
"""

from __future__ import annotations

import re
from functools import cache

from groupd.protocol import ErrorCode
from groupd.protocol.apis import ApiKey
from groupd.protocol.codec import Encoded, build_response

from .request import Request

KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)


_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


CONSUMER_PROTOCOL_APIS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)
STREAMS_PROTOCOL_APIS = (ApiKey.STREAMS_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_DESCRIBE)


VersionTable = tuple[tuple[ApiKey, tuple[int, int]], ...]  # (api, (min, max)), sorted: the node's `api_versions`


def _table(versions: VersionTable, protocols: tuple[str, ...] = ("consumer", "streams")) -> list[dict]:
    """`protocols`: group.coordinator.rebalance.protocols; the APIs of a protocol it does not enable
    are left out (Kafka's ApiVersions does the same for the consumer and streams group APIs)."""
    hidden = (() if "consumer" in protocols else CONSUMER_PROTOCOL_APIS) + (
        () if "streams" in protocols else STREAMS_PROTOCOL_APIS)
    return [{"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in versions if k not in hidden]


@cache
def _ok(versions: VersionTable, version: int, protocols: tuple[str, ...]) -> Encoded:
    return Encoded(build_response(ApiKey.API_VERSIONS, version,
                                  {"error_code": ErrorCode.none, "api_keys": _table(versions, protocols)}))


@cache
def unsupported_version_response(versions: VersionTable):
    return build_response(ApiKey.API_VERSIONS, 0,
                          {"error_code": ErrorCode.unsupported_version, "api_keys": _table(versions)})


def handle(node, request: Request):
    body = request.body
    if request.version >= 3 and not (_SOFTWARE.fullmatch(body.client_software_name)
                                     and _SOFTWARE.fullmatch(body.client_software_version)):
        return build_response(ApiKey.API_VERSIONS, request.version,
                              {"error_code": ErrorCode.invalid_request, "api_keys": []})
    return _ok(node.api_versions, request.version, tuple(node.settings.group_coordinator_rebalance_protocols))
