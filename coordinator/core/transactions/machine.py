"""Kafka's transaction coordinator, sans-IO: one `TxnMetadata` per transactional id and the rules of
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the timeout abort and the id expiry
(TransactionCoordinator.scala, TransactionMetadata.java).

Transactions v2 (KIP-890 part 2) is per request, as in Kafka: a partition added implicitly (Produce
v12, TxnOffsetCommit v5) or an EndTxn v5 marks the transaction as driven by a TV2 client
(`client_version` 2, stored in the log). A TV2 end bumps the epoch (markers carry the bumped one),
rotates to a new producer id when the epoch is exhausted, recognises a retry by the epoch it bumped
from, and may abort a transaction that added nothing.

As in Kafka's TransactionStateManager, a transition is *prepared* (a `TxnValue` to write, held as the
id's `pending` transition: further requests get CONCURRENT_TRANSACTIONS), written by the shell, then
either applied (`apply`, the same path the log's load takes) or dropped (`abandon`: a failed write
changes nothing). Time comes in as `now_ms` (wall clock: Kafka stores it in the records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from groupd.protocol import ErrorCode
from groupd.storage.transaction_records import TxnState, TxnValue

NO_EPOCH = -1
MAX_EPOCH = 32767  # Short.MAX_VALUE


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: one bump must stay possible for fencing."""
    return epoch >= MAX_EPOCH - 1


COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_EPOCH
    last_producer_epoch: int = NO_EPOCH  # memory only, as in Kafka: recognises a retried InitProducerId
    previous_producer_id: int = -1
    timeout_ms: int = 0
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1
    last_update_ms: int = 0
    next_producer_id: int = -1  # TV2: the id a Prepare* whose epoch was exhausted completes with
    client_version: int = 0  # the transaction version of the client driving it (2: TV2)
    pending: TxnValue | None = None  # a transition being written
    stored: bool = False  # a record of it is in the log (else a failed first write forgets it)

    def value(self) -> TxnValue:
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state, self.partitions,
                        self.last_update_ms, self.start_ms, self.previous_producer_id, self.next_producer_id,
                        self.client_version)

    def end_identity(self) -> tuple[int, int]:
        """What an EndTxn v5 answers: the producer id and epoch the client goes on with (a rotated id
        at epoch 0 while the Prepare* of an exhausted epoch completes)."""
        if self.state in PREPARE and self.next_producer_id >= 0:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch


@dataclass(frozen=True, slots=True)
class Transition:
    """What to write for `transactional_id` (a `TxnValue`, or None: a tombstone)."""
    transactional_id: str
    value: TxnValue | None
    last_producer_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class Step:
    """A request's answer: an error now, or a transition to write first (then `error` once durable)."""
    error: ErrorCode
    transition: Transition | None = None


@dataclass
class TransactionCore:
    max_timeout_ms: int
    id_expiration_ms: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)

    # -- the one mutation path: load and completed writes ---------------------------------------

    def apply(self, transactional_id: str, value: TxnValue | None, last_producer_epoch: int = NO_EPOCH) -> None:
        """A record of `__transaction_state` (loaded, or just written): the id's state becomes it."""
        if value is None:
            self.txns.pop(transactional_id, None)
            return
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = self.txns[transactional_id] = TxnMetadata(transactional_id, value.producer_id)
        meta.producer_id, meta.producer_epoch = value.producer_id, value.producer_epoch
        meta.previous_producer_id = value.previous_producer_id
        meta.last_producer_epoch = last_producer_epoch
        meta.timeout_ms, meta.state, meta.partitions = value.timeout_ms, value.state, value.partitions
        meta.start_ms, meta.last_update_ms = value.start_ms, value.last_update_ms
        meta.next_producer_id, meta.client_version = value.next_producer_id, value.client_transaction_version
        meta.pending, meta.stored = None, True

    def written(self, transition: Transition) -> None:
        self.apply(transition.transactional_id, transition.value, transition.last_producer_epoch)

    def abandon(self, transition: Transition) -> None:
        """The write failed: the state stays as it was (an id never stored is forgotten)."""
        meta = self.txns.get(transition.transactional_id)
        if meta is None:
            return
        meta.pending = None
        if not meta.stored:
            del self.txns[transition.transactional_id]

    def _prepare(self, meta: TxnMetadata, value: TxnValue | None, last_epoch: int = NO_EPOCH) -> Transition:
        meta.pending = value if value is not None else meta.value()
        return Transition(meta.transactional_id, value, last_epoch)

    def forget(self, partition_of: Callable[[str], int], partitions: set[int]) -> list[str]:
        """The ids of `partitions` are coordinated elsewhere now (the partition moved): dropped from
        memory, a transition being written for them included (its writer answers NOT_COORDINATOR).
        Returns the ids dropped."""
        gone = [txn_id for txn_id in self.txns if partition_of(txn_id) in partitions]
        for txn_id in gone:
            del self.txns[txn_id]
        return gone

    def adopt(self, loaded: TransactionCore) -> list[TxnMetadata]:
        """The ids of a partition loaded apart (off the loop, into a core of its own) join this one.
        Returns them (those in Prepare* have markers due)."""
        self.txns.update(loaded.txns)
        return list(loaded.txns.values())

    # -- InitProducerId ---------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_id: int, expected_epoch: int,
                         now_ms: int, new_producer_id: Callable[[], int]) -> Step:
        """v3+ passes the producer's current id and epoch (-1, -1 otherwise). The fence of an Ongoing
        transaction answers CONCURRENT_TRANSACTIONS once its PrepareAbort is durable."""
        if not transactional_id:
            return Step(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return Step(ErrorCode.invalid_transaction_timeout)
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = self.txns[transactional_id] = TxnMetadata(transactional_id, new_producer_id(),
                                                             last_update_ms=now_ms)
        expected = expected_id >= 0
        if meta.pending is not None:
            return Step(ErrorCode.concurrent_transactions)
        if expected and not (meta.producer_epoch == NO_EPOCH or expected_id == meta.producer_id or (
                expected_id == meta.previous_producer_id and epoch_exhausted(expected_epoch))):
            return Step(ErrorCode.producer_fenced)
        if meta.state in PREPARE:
            return Step(ErrorCode.concurrent_transactions)
        if meta.state == TxnState.ONGOING:
            # abort it under a bumped epoch (fencing the old producer); the caller retries until done
            return Step(ErrorCode.concurrent_transactions, self._end(meta, False, now_ms, fence=True))
        if meta.state not in COMPLETE:
            return Step(ErrorCode.concurrent_transactions)
        if epoch_exhausted(meta.producer_epoch) and (not expected or expected_epoch == meta.producer_epoch):
            value = TxnValue(new_producer_id(), 0, timeout_ms, TxnState.EMPTY, frozenset(), now_ms, -1,
                             meta.producer_id, client_transaction_version=meta.client_version)
            return Step(ErrorCode.none, self._prepare(meta, value, meta.producer_epoch if expected else NO_EPOCH))
        if not expected:
            epoch, last = meta.producer_epoch + 1, NO_EPOCH
        elif expected_epoch == NO_EPOCH or expected_epoch == meta.producer_epoch:
            epoch, last = meta.producer_epoch + 1, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:  # a retry of a bump that succeeded
            epoch, last = meta.producer_epoch, meta.last_producer_epoch
        else:
            return Step(ErrorCode.producer_fenced)
        value = TxnValue(meta.producer_id, epoch, timeout_ms, TxnState.EMPTY, frozenset(), now_ms, -1,
                         meta.previous_producer_id, client_transaction_version=meta.client_version)
        return Step(ErrorCode.none, self._prepare(meta, value, last))

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------

    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if meta.pending is not None or meta.state in PREPARE:
            return ErrorCode.concurrent_transactions
        return None

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]], now_ms: int, client_version: int = 0) -> Step:
        """The partitions join the transaction (starting it: Ongoing, its timeout running from now).
        `client_version` 2: added implicitly for a TV2 client (AddPartitionsToTxn v5 from a broker)."""
        if not transactional_id:
            return Step(ErrorCode.invalid_request)
        meta = self.txns.get(transactional_id)
        if (error := self._check_producer(meta, producer_id, producer_epoch)) is not None:
            return Step(error)
        added = frozenset(partitions)
        if meta.state == TxnState.ONGOING and added <= meta.partitions:
            return Step(ErrorCode.none)
        if meta.state not in (TxnState.ONGOING, *COMPLETE):
            return Step(ErrorCode.invalid_txn_state)
        start = meta.start_ms if meta.state == TxnState.ONGOING else now_ms
        value = replace(meta.value(), state=TxnState.ONGOING, partitions=meta.partitions | added,
                        last_update_ms=now_ms, start_ms=start, client_transaction_version=client_version)
        return Step(ErrorCode.none, self._prepare(meta, value, meta.last_producer_epoch))

    # -- EndTxn -----------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int, client_version: int = 0, new_producer_id: Callable[[], int] | None = None) -> Step:
        """Ongoing → PrepareCommit/PrepareAbort (the shell then writes the markers and completes);
        a retry of a finished result is NONE, the opposite result INVALID_TXN_STATE. `client_version`
        2 (EndTxn v5): the rules of transactions v2 (`_end_txn_v2`)."""
        if not transactional_id:
            return Step(ErrorCode.invalid_request)
        if client_version >= 2:
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit, now_ms, new_producer_id)
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return Step(ErrorCode.invalid_producer_id_mapping)
        if producer_epoch != meta.producer_epoch:
            return Step(ErrorCode.producer_fenced)
        if meta.pending is not None:
            return Step(ErrorCode.concurrent_transactions)
        state = meta.state
        if state == TxnState.ONGOING:
            return Step(ErrorCode.none, self._end(meta, commit, now_ms))
        if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return Step(ErrorCode.none)
        if state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return Step(ErrorCode.concurrent_transactions)
        return Step(ErrorCode.invalid_txn_state)

    def _end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                    now_ms: int, new_producer_id: Callable[[], int] | None) -> Step:
        """TransactionCoordinator.endTransaction under TV2. Every end bumps the epoch, so the same
        epoch no longer marks a retry: a retry is the epoch just bumped from (`retry_bump`), or the
        last epoch of a producer id rotated since (`retry_overflow`); a finished transaction answers
        a retry NONE. TV2 also lets a client abort a transaction that added no partition yet
        (Empty/Complete*: it may have produced to partitions whose implicit add failed)."""
        meta = self.txns.get(transactional_id)
        if meta is None:
            return Step(ErrorCode.invalid_producer_id_mapping)
        retry_overflow = (meta.previous_producer_id == producer_id and producer_epoch == MAX_EPOCH - 1
                          and meta.producer_epoch == 0)
        retry_bump = meta.producer_epoch == producer_epoch + 1
        state = meta.state
        if state in PREPARE:
            valid = retry_bump
        elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid = retry_bump or retry_overflow or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        retry = retry_bump or retry_overflow
        if meta.producer_id != producer_id and not retry_overflow:
            return Step(ErrorCode.invalid_producer_id_mapping)
        if not valid:
            return Step(ErrorCode.producer_fenced)
        if meta.pending is not None:
            return Step(ErrorCode.concurrent_transactions)
        if state == TxnState.ONGOING:
            return Step(ErrorCode.none, self._end_v2(meta, commit, now_ms, new_producer_id, added_nothing=False))
        if state == TxnState.COMPLETE_COMMIT:
            if commit:
                return Step(ErrorCode.none if retry else ErrorCode.invalid_txn_state)
            if retry:
                return Step(ErrorCode.invalid_txn_state)
        elif state == TxnState.COMPLETE_ABORT:
            if commit:
                return Step(ErrorCode.invalid_txn_state)
            if retry:
                return Step(ErrorCode.none)
        elif state in PREPARE:
            same = state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
            return Step(ErrorCode.concurrent_transactions if same else ErrorCode.invalid_txn_state)
        elif state != TxnState.EMPTY or commit:
            return Step(ErrorCode.invalid_txn_state)
        # an abort of a transaction that added nothing (Empty, Complete*): bumped, with nothing to mark
        return Step(ErrorCode.none, self._end_v2(meta, False, now_ms, new_producer_id, added_nothing=True))

    def _end_v2(self, meta: TxnMetadata, commit: bool, now_ms: int, new_producer_id: Callable[[], int] | None,
                added_nothing: bool) -> Transition:
        """Prepare* under a bumped epoch (prepareAbortOrCommit); an exhausted epoch also takes the
        next producer id, which Complete* switches to (epoch 0)."""
        next_id = new_producer_id() if epoch_exhausted(meta.producer_epoch) and new_producer_id else -1
        # a fence may already have taken the epoch to its maximum: the markers keep it, the id rotates
        value = replace(meta.value(), producer_epoch=min(meta.producer_epoch + 1, MAX_EPOCH),
                        state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                        partitions=frozenset() if added_nothing else meta.partitions, last_update_ms=now_ms,
                        start_ms=now_ms if added_nothing else meta.start_ms, next_producer_id=next_id,
                        client_transaction_version=2)
        return self._prepare(meta, value, meta.producer_epoch)

    def _end(self, meta: TxnMetadata, commit: bool, now_ms: int, fence: bool = False) -> Transition:
        epoch = meta.producer_epoch + 1 if fence and meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        value = replace(meta.value(), producer_epoch=epoch,
                        state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, last_update_ms=now_ms,
                        next_producer_id=-1)
        return self._prepare(meta, value, NO_EPOCH if fence else meta.last_producer_epoch)

    def complete(self, transactional_id: str, now_ms: int) -> Transition | None:
        """Every marker of a Prepare* transaction is written: its Complete* record (None if the id
        is no longer in a Prepare* state or a write for it is under way)."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.state not in PREPARE or meta.pending is not None:
            return None
        state = TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        value = replace(meta.value(), state=state, partitions=frozenset(), last_update_ms=now_ms, next_producer_id=-1)
        if meta.client_version >= 2 and meta.next_producer_id >= 0:  # the exhausted epoch's id rotates
            value = replace(value, producer_id=meta.next_producer_id, producer_epoch=0,
                            previous_producer_id=meta.producer_id)
        return self._prepare(meta, value, meta.last_producer_epoch)

    def preparing(self) -> list[TxnMetadata]:
        """Transactions whose markers are due (Prepare*), e.g. found at load."""
        return [m for m in self.txns.values() if m.state in PREPARE and m.pending is None]

    # -- housekeeping -----------------------------------------------------------------------------

    def timed_out(self, now_ms: int) -> list[Transition]:
        """Ongoing transactions past their timeout: aborted under a bumped epoch (fencing the
        producer), as Kafka's abortTimedOutTransactions."""
        due = [m for m in self.txns.values()
               if m.state == TxnState.ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now_ms]
        return [self._end(m, False, now_ms, fence=True) for m in due]

    def expired(self, now_ms: int) -> list[Transition]:
        """Ids idle in Empty/Complete* longer than `transactional.id.expiration.ms`: tombstoned."""
        due = [m for m in self.txns.values() if m.state in COMPLETE and m.pending is None
               and m.last_update_ms <= now_ms - self.id_expiration_ms]
        return [self._prepare(m, None) for m in due]

    # -- verification (contract seam 3) -----------------------------------------------------------

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partition: tuple[str, int]) -> ErrorCode:
        """Whether a transactional write for `partition` is part of the live transaction (Kafka's
        handleVerifyPartitionsInTransaction: TRANSACTION_ABORTABLE for a partition not in it, which
        the broker hands older clients as INVALID_TXN_STATE)."""
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced
        if meta.state in PREPARE:
            return ErrorCode.concurrent_transactions
        if partition not in meta.partitions:  # (none outside Ongoing) the client's cue to abort
            return ErrorCode.transaction_abortable
        return ErrorCode.none
