"""ApiVersions (18), v0–v4.

v1 adds throttle time; v3 is flexible and carries the client's software name and version
(validated like Kafka: an invalid one gets INVALID_REQUEST), and its tagged fields the features;
v4 changes nothing on the wire but lists supported features whose minimum is 0 (v3 leaves them out).
A version above ours is answered as v0 with UNSUPPORTED_VERSION and the table (KIP-511).

Features: the one a client acts on, `transaction.version` (supported 0–2; finalized at the
`transaction.version` setting, since groupd has no controller to finalize it; a level of 0 is not
listed, as Kafka drops a feature finalized at 0). Java clients 4.x run transactions v2 (KIP-890) when
it is finalized at 2 or more. Kafka's other features (metadata.version, kraft.version, group.version
and the rest) are not listed: no client changes its behaviour on them.
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


TRANSACTION_VERSION = ("transaction.version", 0, 2)  # (name, min, max) supported
FEATURES_EPOCH = 0  # Kafka's is the metadata log offset; a client takes any epoch newer than -1

VersionTable = tuple[tuple[ApiKey, tuple[int, int]], ...]  # (api, (min, max)), sorted: the node's `api_versions`


def _table(versions: VersionTable, protocols: tuple[str, ...] = ("consumer", "streams")) -> list[dict]:
    """`protocols`: group.coordinator.rebalance.protocols; the APIs of a protocol it does not enable
    are left out (Kafka's ApiVersions does the same for the consumer and streams group APIs)."""
    hidden = (() if "consumer" in protocols else CONSUMER_PROTOCOL_APIS) + (
        () if "streams" in protocols else STREAMS_PROTOCOL_APIS)
    return [{"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in versions if k not in hidden]


def _features(version: int, transaction_version: int) -> dict:
    """The tagged feature fields of v3+."""
    name, low, high = TRANSACTION_VERSION
    supported = [{"name": name, "min_version": low, "max_version": high}] if version >= 4 or low > 0 else []
    finalized = [{"name": name, "max_version_level": transaction_version, "min_version_level": transaction_version}
                 ] if transaction_version > 0 else []
    return {"supported_features": supported, "finalized_features_epoch": FEATURES_EPOCH,
            "finalized_features": finalized}


@cache
def _ok(versions: VersionTable, version: int, protocols: tuple[str, ...], transaction_version: int = 0) -> Encoded:
    values = {"error_code": ErrorCode.none, "api_keys": _table(versions, protocols)}
    if version >= 3:
        values.update(_features(version, transaction_version))
    return Encoded(build_response(ApiKey.API_VERSIONS, version, values))


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
    return _ok(node.api_versions, request.version, tuple(node.settings.group_coordinator_rebalance_protocols),
               node.settings.transaction_version)
