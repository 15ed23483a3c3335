"""Physical-limit echo server: Kafka framing, no protocol logic.

It answers every complete frame with a fixed ApiVersions v0-style response that carries the
request's correlation id. Whatever rate this reaches on the machine is the ceiling a Python
asyncio server can reach with this framing; groupd's numbers are read against it.

    python bench/echo_server.py --port 9092     # prints "ready" once listening on 127.0.0.1
"""

import argparse
import asyncio
import struct

# ApiVersions v0 response body: error_code=0, api_keys=[(18, min 0, max 3)]. Encoded once.
BODY = struct.pack(">hihhh", 0, 1, 18, 0, 3)
SIZE = struct.pack(">i", 4 + len(BODY))  # size covers correlation_id + body
MAX_FRAME = 100 * 1024 * 1024  # same sanity bound a real broker applies; larger closes the link
_size = struct.Struct(">i").unpack_from


class EchoProtocol(asyncio.Protocol):
    __slots__ = ("transport", "buf")

    def connection_made(self, transport):
        self.transport = transport
        self.buf = bytearray()

    def data_received(self, data):
        buf = self.buf
        buf += data
        out = []
        pos, end = 0, len(buf)
        # Pipelining: walk every complete frame in the buffer; bounded by the buffer length
        # because each iteration advances pos by at least 4 bytes.
        while end - pos >= 4:
            (n,) = _size(buf, pos)
            if n < 8 or n > MAX_FRAME:  # header needs api_key, api_version, correlation_id
                self.transport.close()
                return
            if end - pos - 4 < n:
                break
            # correlation_id sits after size(4) + api_key(2) + api_version(2)
            out.append(SIZE)
            out.append(bytes(buf[pos + 8:pos + 12]))
            out.append(BODY)
            pos += 4 + n
        if pos:
            del buf[:pos]
        if out:
            self.transport.write(b"".join(out))  # one write per read, not per frame


def install_loop_policy() -> str:
    """uvloop when installed, plain asyncio otherwise; returns the name for reports."""
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    # A large backlog so 1000 simultaneous connects do not hit SYN retries (1 s stalls).
    server = await loop.create_server(EchoProtocol, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    install_loop_policy()
    try:
        asyncio.run(serve(args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
