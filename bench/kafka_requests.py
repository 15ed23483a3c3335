"""Pre-encoded request types for bench/loadgen.py (`--request NAME`).

Each entry is (encode, check): encode(correlation_id) -> the whole frame, size prefix included,
built by splicing the id into bytes encoded once; check(buf, body_start, body_end) -> True when
the response body means success. To benchmark another API, add one entry to REQUESTS.
"""

import struct

_i32 = struct.Struct(">i")


def request_type(api_key: int, version: int, body: bytes, flexible: bool, client=b"bench"):
    """Pre-encode everything but the correlation id; return encode(corr_id) -> frame bytes.

    flexible: request header v2 (flexible versions) ends with an empty tag buffer.
    """
    tail = struct.pack(">h", len(client)) + client + (b"\x00" if flexible else b"") + body
    head = _i32.pack(8 + len(tail)) + struct.pack(">hh", api_key, version)
    return lambda corr: head + _i32.pack(corr) + tail


def error_code_first(buf, start: int, end: int) -> bool:
    """Check for bodies opening with int16 error_code; start..end is the body (after header v0)."""
    return end - start >= 2 and buf[start] == 0 and buf[start + 1] == 0


# name -> (encode(corr) -> frame, check(buf, body_start, body_end) -> ok). Add new types here, and
# where the body's error code sits to CHECK_OFFSETS (the compiled driver checks only that).
REQUESTS = {
    # ApiVersions v3: header v2; body = compact strings client_software_name "bench" and
    # client_software_version "1.0" (varint length+1), empty tags. Its response always uses
    # header v0, so error_code follows the correlation id directly.
    "apiversions": (request_type(18, 3, b"\x06bench\x041.0\x00", flexible=True), error_code_first),
}

CHECK_OFFSETS = {"apiversions": 0}
