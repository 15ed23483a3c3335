"""Decode cost per request frame: parse_header + decode_request over tests/golden/requests.json,
µs per frame (best of 5 timeit runs), per API and overall. Run from a checkout's root to measure
that checkout: `python bench/decode_cost.py [--number N]`."""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

ROOT = Path.cwd()  # the checkout to measure
sys.path.insert(0, str(ROOT))

from groupd.protocol.apis import ApiKey  # noqa: E402
from groupd.protocol.codec import decode_request, is_flexible, parse_header  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=2000, help="decodes per timeit run")
    args = parser.parse_args()
    cases = json.loads((ROOT / "tests/golden/requests.json").read_text())
    by_api: dict[str, list[float]] = {}
    for case in cases:
        api, version, frame = case["api_key"], case["version"], bytes.fromhex(case["frame"])
        flexible = is_flexible(api, version)

        def decode() -> None:
            _, offset = parse_header(frame, flexible)
            decode_request(api, version, frame, offset)

        best = min(timeit.repeat(decode, number=args.number, repeat=5)) / args.number * 1e6
        by_api.setdefault(ApiKey(api).name, []).append(best)
    for name, costs in sorted(by_api.items()):
        print(f"{name:20s} {sum(costs) / len(costs):7.2f} µs/frame  ({len(costs)} frames)")
    every = [c for costs in by_api.values() for c in costs]
    print(f"{'ALL':20s} {sum(every) / len(every):7.2f} µs/frame  ({len(every)} frames)")


if __name__ == "__main__":
    main()
