"""The compiled closed-loop driver (bench/loadgen-go, Go, standard library only) from Python: built
once with `go build` into ~/.cache/groupd-bench, handed one pre-encoded frame per connection, its
window's figures returned as a dict. `loadgen.py --driver go` and `members.py heartbeat --driver go`
use it so that the client side costs a fraction of a core: the echo server's figure is then the
machine's limit, not the Python load generator's."""

import base64
import json
import os
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loadgen-go")
BINARY = os.path.join(os.path.expanduser("~"), ".cache", "groupd-bench", "loadgen-go")


def binary() -> str:
    """The built driver, rebuilt when its source is newer."""
    source = os.path.join(SOURCE, "main.go")
    if not os.path.exists(BINARY) or os.path.getmtime(BINARY) < os.path.getmtime(source):
        os.makedirs(os.path.dirname(BINARY), exist_ok=True)
        subprocess.run(["go", "build", "-o", BINARY, "."], cwd=SOURCE, check=True, timeout=300,
                       env={**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"})
    return BINARY


def run(conns, depth: int, warmup: float, seconds: float, check_offset: int, server_pids=(),
        host: str = "127.0.0.1") -> dict:
    """`conns`: (port, frame) per connection, each frame a whole request with correlation id 0;
    `check_offset`: where the reply body's int16 error code sits (-1: replies are not checked);
    `server_pids`: processes whose CPU use in the window is reported as server_cpu_pct."""
    plan = {"host": host, "depth": depth, "warmup_s": warmup, "seconds": seconds, "check_offset": check_offset,
            "server_pids": [int(p) for p in server_pids],
            "conns": [{"port": port, "frame": base64.b64encode(frame).decode()} for port, frame in conns]}
    out = subprocess.run([binary()], input=json.dumps(plan), capture_output=True, text=True,
                         timeout=warmup + seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen-go failed: {out.stderr.strip()}")
    return json.loads(out.stdout)
