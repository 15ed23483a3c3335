"""A data partition's leader epochs: which epoch began at which offset (Kafka's `LeaderEpochFileCache`),
kept in the partition directory's `leader-epoch-checkpoint` in Kafka's text format:

    0                  version
    2                  number of entries
    0 0                epoch, start offset (oldest first)
    7 1234

OffsetForLeaderEpoch answers from it (`end_offset_for`), ListOffsets reads the epoch of an offset
(`epoch_for`). The history changes only when a new leader takes the partition (`assign`) and when
loading cuts the log below an entry (`truncate_from_end`). Pure: the file is read and written by the
caller's functions below (blocking; off the loop).
"""

from __future__ import annotations

import bisect
import os

from ..files import atomic_write

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochs:
    """(epoch, start offset) entries, both strictly increasing."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])

    @property
    def latest(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """A leader of `epoch` starts writing at `start_offset` (Kafka's `assign`): entries of an epoch
        ≥ it or starting at or after the offset are replaced. False when nothing changed (the epoch is
        already the latest, from that offset or before)."""
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return False
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log ends at `end_offset` (a torn tail cut): entries starting at or after it go."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        changed = len(kept) != len(self.entries)
        self.entries = kept
        return changed

    def from_start(self, log_start: int) -> LeaderEpochs:
        """The history as Kafka keeps it once the log start moved there (its `truncateFromStart`, on
        DeleteRecords and retention): the epoch holding the log start begins at it, older ones are
        gone. A view: the file keeps the full history, the answers are Kafka's."""
        below = [(e, o) for e, o in self.entries if o <= log_start]
        if not below:
            return self
        return LeaderEpochs([(below[-1][0], log_start)] + self.entries[len(below):])

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's `LeaderEpochFileCache.endOffsetFor`: the latest epoch ends at
        the log end; an older one at the start of the next larger epoch, with the largest known epoch
        ≤ the requested one (the requested one itself when it is older than all); -1 or an epoch larger
        than any known: (-1, -1)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest:
            return epoch, log_end
        epochs = [e for e, _ in self.entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if higher == 0:
            return epoch, self.entries[0][1]
        return self.entries[higher - 1][0], self.entries[higher][1]

    def epoch_for(self, offset: int) -> int:
        """The epoch whose range holds `offset` (Kafka's `epochForOffset`): -1 below the first entry."""
        starts = [o for _, o in self.entries]
        i = bisect.bisect_right(starts, offset) - 1
        return self.entries[i][0] if i >= 0 else UNDEFINED_EPOCH

    def text(self) -> str:
        return "0\n%d\n%s" % (len(self.entries), "".join(f"{e} {o}\n" for e, o in self.entries))


def parse(text: str, path: str = CHECKPOINT_FILE) -> LeaderEpochs:
    """The entries of a checkpoint's text; a damaged one raises OSError naming it (the partition is not
    loaded: a wrong history would answer OffsetForLeaderEpoch wrongly and make clients truncate)."""
    lines = text.split("\n")
    try:
        if lines[0] != "0":
            raise ValueError(f"version {lines[0]!r}, expected 0")
        count = int(lines[1])
        entries = []
        for line in lines[2:2 + count]:
            epoch, offset = line.split(" ")
            entries.append((int(epoch), int(offset)))
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, expected {count}")
        if any(a[0] >= b[0] or a[1] > b[1] for a, b in zip(entries, entries[1:])) or \
                any(e < 0 or o < 0 for e, o in entries):
            raise ValueError("entries out of order")
    except (IndexError, ValueError) as e:
        raise OSError(f"{path} is damaged ({e}): fix it as `0`, `<count>`, `<epoch> <start offset>` lines, "
                      "or delete it (the partition's current epoch then starts at its log end)") from None
    return LeaderEpochs(entries)


def read_epochs(directory: str) -> LeaderEpochs:
    """The partition's history; empty without a file (a log written before epochs were kept)."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return LeaderEpochs()
    return parse(text, path)


def write_epochs(directory: str, epochs: LeaderEpochs) -> None:
    atomic_write(os.path.join(directory, CHECKPOINT_FILE), epochs.text().encode())
