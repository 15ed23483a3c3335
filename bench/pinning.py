"""CPU pinning for the load benches (issue 27): the server under test on one set of CPUs, the load
generator on another, so the two stop taking turns on one core and the echo server's figure is the
machine's limit for this framing. `--pin 0:1` (server CPUs : client CPUs) on run_groups.py,
run_consumer_groups.py and storage_bench.py; the choice reaches the client scripts they start
(members.py, consumers.py, loadgen.py and the compiled driver, which inherits its parent's mask)
through GROUPD_BENCH_PIN. The server is pinned once it listens: every thread it has then (the
loop, the fsync workers) is moved, and threads it starts later inherit the mask.
"""

import os

ENV = "GROUPD_BENCH_PIN"


def add_argument(ap) -> None:
    ap.add_argument("--pin", default=os.environ.get(ENV, ""), metavar="SERVER:CLIENT",
                    help="CPU lists (e.g. 0:1 or 0:1,2): the server on the first, the load generator on the second")


def _cpus(text: str) -> set[int]:
    return {int(c) for c in text.split(",") if c}


def parse(spec: str) -> tuple[set[int], set[int]] | None:
    if not spec:
        return None
    server, _, client = spec.partition(":")
    return _cpus(server), _cpus(client)


def use(spec: str) -> None:
    """Record the choice for the child scripts and pin this (client-side) process."""
    if spec:
        os.environ[ENV] = spec
    pin_client()


def pin_client() -> None:
    """Pin this process to the client CPUs, if pinning was asked for."""
    cpus = parse(os.environ.get(ENV, ""))
    if cpus:
        os.sched_setaffinity(0, cpus[1])


def pin_server(pid: int) -> None:
    """Pin every thread of the server process `pid` to the server CPUs, if pinning was asked for."""
    cpus = parse(os.environ.get(ENV, ""))
    if not cpus:
        return
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus[0])
        except ProcessLookupError:  # a thread that just ended
            pass


def describe() -> str:
    cpus = parse(os.environ.get(ENV, ""))
    if not cpus:
        return "not pinned"
    return f"server on CPU {','.join(map(str, sorted(cpus[0])))}, client on CPU {','.join(map(str, sorted(cpus[1])))}"
