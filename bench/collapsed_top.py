"""Top functions of a py-spy raw (collapsed-stack) profile, by total (cumulative) and by self samples.

    py-spy record -p PID -d 5 -r 250 --nonblocking --function --format raw -o OUT
    python bench/collapsed_top.py OUT [-n 10]

Each line of OUT is "frame;frame;...;leaf COUNT". A function's total counts every sample with it
anywhere on the stack (once per sample); its self counts the samples where it is the leaf.
"""

import argparse
import collections


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("-n", type=int, default=10)
    args = ap.parse_args()
    total, cum, own = 0, collections.Counter(), collections.Counter()
    with open(args.path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames, n = stack.split(";"), int(count)
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                cum[frame] += n
    print(f"{total} samples (busy only: py-spy drops samples of an idle thread)")
    for title, counter in (("total (cumulative)", cum), ("self", own)):
        print(f"\ntop {args.n} by {title}:")
        for frame, n in counter.most_common(args.n):
            print(f"  {100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
