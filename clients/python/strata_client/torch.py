"""A PyTorch dataset over a Strata table (needs torch and numpy; the rest of
the client imports without them).

    from strata_client import Client
    from strata_client.torch import TableDataset

    ds = TableDataset(Client("http://127.0.0.1:8080"), "rollouts", columns=["obs", "reward"],
                      batch_size=1024, shuffle=True, seed=7)
    loader = ds.loader(num_workers=2)
    for epoch in range(start, epochs):
        ds.set_epoch(epoch)
        for batch in loader:          # {"obs": tensor, "reward": tensor}
            ...
            save({"model": ..., "data": ds.state_dict()})

How a version is split. The dataset reads one version of the table (the
latest when it is made, unless ``version=`` names one). Its fragments are
cut into slices of at most ``slice_rows`` rows (by default about four a
rank, from 1,024 to 65,536 rows: a slice is one request); each epoch orders the slices (shuffled from ``seed`` and the epoch
when ``shuffle``), gives the i-th to rank ``i % world_size``, and within a
rank the j-th of its slices to DataLoader worker ``j % num_workers``. A row
lies in one slice, so each is read by exactly one rank and worker per
epoch. With ``shuffle``, the rows of each slice are shuffled too (from the
seed, the epoch and the slice), and batches are cut from a worker's rows in
that order. Ranks may get a different number of rows (slices differ in
size): a distributed trainer that needs equal steps uses its own join (as
``torch.distributed.algorithms.Join``) or drops the last steps.

Resuming. ``state_dict()`` is what the batches handed out so far read — the
slices done and how far into each begun one — so that ``load_state_dict``
on a dataset made with the same arguments resumes the epoch with no row
read twice or missed, even with another number of DataLoader workers. It
needs to see the batches: iterate the dataset itself, or through
``loader()`` (a DataLoader whose batches report back where they were cut);
a plain DataLoader with workers keeps that in its worker processes (they
warn), and ``state_dict()`` in the trainer does not see it.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from . import Client

__all__ = ["TableDataset", "StreamDataset"]

_Slice = Tuple[int, int, int]  # fragment id, first offset, end offset


class TableDataset(IterableDataset):
    """Batches of a table's rows as dicts of column name to tensor (numbers,
    booleans, timestamps as int64 of their unit, dates as int64 days;
    uint16 as int32, uint32 and uint64 as int64, which torch has); string and
    binary columns as lists. A null in a float column reads as NaN; in
    another numeric column it is an error naming the column (filter it out
    with ``filter="col IS NOT NULL"``). See the module for how the version is
    split and resumed."""

    def __init__(self, client: Client, table: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                 version: Optional[int] = None, batch_size: int = 1024, shuffle: bool = False, seed: int = 0,
                 rank: Optional[int] = None, world_size: Optional[int] = None, slice_rows: Optional[int] = None) -> None:
        super().__init__()
        if batch_size < 1 or slice_rows is not None and slice_rows < 1:
            raise ValueError("batch_size and slice_rows must be at least 1")
        self.table, self.columns, self.filter = table, list(columns) if columns else None, filter
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.rank, self.world_size = _rank(rank, world_size)
        self._settings = dict(base_url=client.base, token=client.token, timeout=client.timeout, retries=client.retries,
                              retry_for=client.retry_for)
        self._client, self._pid = client, os.getpid()
        self.version = self._pinned(version)
        listed = self._get_client().fragments(table, version=self.version)
        self.slice_rows = slice_rows or _slice_rows(sum(f["live_rows"] for f in listed["fragments"]), self.world_size)
        slice_rows = self.slice_rows
        self._slices: List[_Slice] = [(f["id"], lo, min(lo + slice_rows, f["rows"]))
                                      for f in listed["fragments"] if f["live_rows"] > 0
                                      for lo in range(0, f["rows"], slice_rows)]
        self.epoch = 0
        self._done: set = set()  # slices whose rows were all handed out
        self._taken: Dict[Tuple[int, int], int] = {}  # rows handed out of begun slices
        self._mark, self._exhausted = False, False

    # -- what callers use ----------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Reads epoch ``epoch`` next: its order of slices and rows (with
        ``shuffle``). A new epoch starts from its beginning; the epoch a loaded
        state is in resumes where it was."""
        if epoch != self.epoch:
            self._done, self._taken, self._exhausted = set(), {}, False
        self.epoch = epoch

    def loader(self, **kwargs: Any) -> "_Loader":
        """A DataLoader over this dataset (``batch_size=None``: the dataset cuts
        the batches) that keeps ``state_dict()`` exact with any number of
        workers; ``kwargs`` go to DataLoader (``num_workers``, ``pin_memory``,
        ``prefetch_factor``...). Not ``persistent_workers``: a worker kept
        across epochs would not see ``set_epoch`` or a loaded state."""
        if kwargs.get("persistent_workers"):
            raise ValueError("loader(): persistent_workers would keep each worker's copy of the dataset across set_epoch "
                             "and load_state_dict; leave it out")
        if kwargs.pop("batch_size", None) is not None:
            raise ValueError("loader(): the dataset cuts the batches (TableDataset(batch_size=...)); give no batch_size")
        return _Loader(self, kwargs)

    def state_dict(self) -> Dict[str, Any]:
        """Where this rank is in the epoch: what ``load_state_dict`` takes to
        resume it (plain data: JSON and ``torch.save`` hold it)."""
        return dict(self._identity(), epoch=self.epoch, done=sorted([list(s) for s in self._done]),
                    taken=sorted([[f, lo, n] for (f, lo), n in self._taken.items()]))

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes the epoch a ``state_dict()`` was taken in. The state must come
        from a dataset of the same table, version, rank, world size, seed,
        shuffle, slice size, filter and columns: another would read other rows,
        and is refused naming what differs."""
        for k, v in self._identity().items():
            if state.get(k) != v:
                raise ValueError(f"load_state_dict: the state is of {k}={state.get(k)!r}, this dataset's is {v!r}")
        self.epoch = int(state["epoch"])
        self._done = {tuple(s) for s in state["done"]}
        self._taken = {(f, lo): n for f, lo, n in state["taken"]}
        self._exhausted = False

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = get_worker_info()
        if self._exhausted:  # the last pass ended (here, or in the process that made this copy): this one starts the epoch again
            self._done, self._taken, self._exhausted = set(), {}, False
        if info is not None and not self._mark and info.id == 0:
            warnings.warn("TableDataset read by DataLoader workers outside TableDataset.loader(): the workers keep "
                          "where they are, and state_dict() in the trainer does not see these batches", stacklevel=2)
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        mine = self._order()[self.rank::self.world_size][worker::workers]
        for batch, position in self._batches(mine):
            if info is None:
                self._advance(position)
            elif self._mark:  # for loader(), which makes the tensors
                yield batch, position
                continue
            yield _tensors(batch)
        if info is None:
            self._exhausted = True

    # -- how ------------------------------------------------------------------

    def _identity(self) -> Dict[str, Any]:
        return {"table": self.table, "version": self.version, "rank": self.rank, "world_size": self.world_size,
                "seed": self.seed, "shuffle": self.shuffle, "slice_rows": self.slice_rows, "filter": self.filter,
                "columns": self.columns}

    def _get_client(self) -> Client:
        """This process's client: a DataLoader worker makes its own (a forked
        copy of the parent's would share its connections)."""
        if self._client is None or self._pid != os.getpid():
            self._client, self._pid = Client(**self._settings, own_writes=False), os.getpid()
        return self._client

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _pinned(self, version: Optional[int]) -> int:
        """The version every rank reads: the one given; otherwise rank 0's
        latest, shared through torch.distributed."""
        if version is not None:
            return int(version)
        dist = torch.distributed
        joined = dist.is_available() and dist.is_initialized()
        if self.world_size > 1 and not joined:
            raise ValueError("TableDataset: with world_size > 1 and no torch.distributed process group, each rank would "
                             "read its own latest version; give version= (the same to every rank)")
        latest = self._get_client().fragments(self.table)["version"] if self.rank == 0 or not joined else None
        if joined and dist.get_world_size() > 1:
            box = [latest]
            dist.broadcast_object_list(box, src=0)
            latest = box[0]
        return int(latest)

    def _order(self) -> List[_Slice]:
        """This epoch's order of the version's slices."""
        if not self.shuffle:
            return list(self._slices)
        rng = np.random.default_rng([self.seed, self.epoch])
        return [self._slices[i] for i in rng.permutation(len(self._slices))]

    def _batches(self, slices: List[_Slice]) -> Iterator[Tuple[Dict[str, Any], list]]:
        """Batches of batch_size rows cut from the slices' rows in order (the
        last may be short), each with its position: [fragment, first offset,
        end offset, rows handed out of that slice, whether it is done] for each
        slice it took rows from, and for slices with no rows left done before
        it."""
        pending: List[Dict[str, np.ndarray]] = []
        have = 0
        position: list = []
        for f, lo, hi in slices:
            if (f, lo, hi) in self._done:
                continue
            cols = self._read(f, lo, hi)
            n = len(next(iter(cols.values()))) if cols else 0
            skip = self._taken.get((f, lo), 0)
            at = skip
            if at >= n:
                position.append([f, lo, hi, 0, True])
                continue
            while at < n:
                take = min(self.batch_size - have, n - at)
                pending.append({k: v[at:at + take] for k, v in cols.items()})
                have += take
                at += take
                position.append([f, lo, hi, take, at == n])
                if have == self.batch_size:
                    yield self._batch(pending), position
                    pending, have, position = [], 0, []
        if have:
            yield self._batch(pending), position

    def _read(self, fragment: int, lo: int, hi: int) -> Dict[str, Any]:
        cols = self._get_client().scan_numpy(self.table, columns=self.columns, filter=self.filter, version=self.version,
                                             fragment=fragment, offsets=(lo, hi))
        if self.shuffle and cols:
            n = len(next(iter(cols.values())))
            perm = np.random.default_rng([self.seed, self.epoch, fragment, lo]).permutation(n)
            cols = {k: v[perm] for k, v in cols.items()}
        return cols

    def _batch(self, parts: List[Dict[str, Any]]) -> Dict[str, Any]:
        out = {}
        for name in parts[0]:
            vals = [p[name] for p in parts]
            out[name] = (np.ma.concatenate(vals) if any(np.ma.isMaskedArray(v) for v in vals)
                         else np.concatenate(vals) if len(vals) > 1 else vals[0])
        return out

    def _advance(self, position: list) -> None:
        for f, lo, hi, n, done in position:
            if done:
                self._taken.pop((f, lo), None)
                self._done.add((f, lo, hi))
            else:
                self._taken[(f, lo)] = self._taken.get((f, lo), 0) + n


class StreamDataset(IterableDataset):
    """The rows a table gains, as they land, for online learning: each rank
    follows the table as a member of consumer group ``group`` (named
    ``rank-R``), so that every new row goes to one of them. It runs in the
    trainer's process, not in DataLoader workers (they prefetch, and would
    acknowledge rows the trainer has not taken). Yields batches of up to
    ``batch_size`` inserted rows as ``TableDataset`` does (a run's last batch
    may be short, so that rows wait no longer than a run), forever. A run is
    acknowledged to the group when the next is asked for — after its batches
    were taken — so a rank that dies has its unacknowledged rows read again
    by the member that takes its share over (after ``lease`` seconds), and a
    rank stopped cleanly (the iterator closed) gives its share back at once.
    Deleted rows are not yielded."""

    def __init__(self, client: Client, table: str, group: str, columns: Optional[Sequence[str]] = None,
                 filter: Optional[str] = None, batch_size: int = 1024, wait: float = 30, lease: float = 60,
                 rank: Optional[int] = None, world_size: Optional[int] = None) -> None:
        super().__init__()
        self.table, self.group, self.columns, self.filter = table, group, list(columns) if columns else None, filter
        self.batch_size, self.wait, self.lease = batch_size, wait, lease
        self.rank, self.world_size = _rank(rank, world_size)
        self._settings = dict(base_url=client.base, token=client.token, timeout=max(client.timeout, wait + 30),
                              retries=client.retries, retry_for=client.retry_for)

    def member(self) -> str:
        """This rank's member name in the group."""
        return f"rank-{self.rank}"

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        if get_worker_info() is not None:
            # A worker asks for the next run — which acknowledges this one —
            # ahead of the trainer (it prefetches), and may outlive a rank
            # killed mid-step, renewing its claim for ever.
            raise RuntimeError("StreamDataset acknowledges a run when the next is asked for; a DataLoader worker asks "
                               "ahead of the trainer: iterate it in the trainer's process (num_workers=0)")
        client = Client(**self._settings, own_writes=False)
        run = client.follow(self.table, group=self.group, member=self.member(), wait=self.wait,
                            columns=self.columns, filter=self.filter, lease=self.lease)
        try:
            for rows, _ in run:
                inserted = [r for r in rows if r.get("_change") == "insert"]
                for at in range(0, len(inserted), self.batch_size):
                    yield _row_batch(inserted[at:at + self.batch_size])
        finally:
            run.close()  # leaves the group
            client.close()


def _row_batch(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Rows (dicts from JSON lines) as a batch: integers, floats (a null as
    NaN) and booleans as tensors, other values (and integers with nulls) as
    lists."""
    out = {}
    for name in rows[0]:
        if name in ("_change",):
            continue
        vals = [r.get(name) for r in rows]
        kinds = {type(v) for v in vals}
        if kinds == {bool} or kinds == {int}:
            out[name] = torch.tensor(vals)
        elif float in kinds and kinds <= {int, float, type(None)}:  # a float column: a null as NaN
            out[name] = torch.tensor([float("nan") if v is None else float(v) for v in vals], dtype=torch.float64)
        else:
            out[name] = vals
    return out


class _Loader:
    """A DataLoader over a TableDataset whose batches report to it where they
    were cut (see TableDataset.loader)."""

    def __init__(self, ds: TableDataset, kwargs: Dict[str, Any]) -> None:
        self.ds, self.kwargs = ds, kwargs

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        ds = self.ds
        if ds._exhausted:
            ds._done, ds._taken, ds._exhausted = set(), {}, False
        if not self.kwargs.get("num_workers"):
            yield from ds
            return
        # The workers' copies hand over NumPy arrays with where they were cut:
        # arrays pickle through the workers' pipes, where each tensor would
        # cost a shared memory segment (1,000,000 rows in batches of 1,024
        # through 2 workers: 4.2 s as tensors). The tensors are made here,
        # without a copy.
        kwargs = dict(self.kwargs)
        pin = kwargs.pop("pin_memory", False) and torch.cuda.is_available()
        ds._mark = True
        try:
            it = iter(DataLoader(ds, batch_size=None, collate_fn=_as_is, **kwargs))  # the workers start here
        finally:
            ds._mark = False
        for batch, position in it:
            ds._advance(position)
            out = _tensors(batch)
            yield {k: v.pin_memory() if pin and isinstance(v, torch.Tensor) else v for k, v in out.items()}
        ds._exhausted = True


def _rank(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    """The rank and world size given, or torch.distributed's, or RANK and
    WORLD_SIZE's, or 0 of 1."""
    dist = torch.distributed
    if rank is None and dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
    if world_size is None and dist.is_available() and dist.is_initialized():
        world_size = dist.get_world_size()
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"TableDataset: rank {rank} of world size {world_size}: want 0 <= rank < world_size")
    return rank, world_size


def _slice_rows(rows: int, world_size: int) -> int:
    """The slice size for a version of rows rows: about four slices a rank,
    so that each rank's workers have some, within 1,024 and 65,536 rows, and
    a multiple of a row group (16,384 rows) when at least one. A slice is one
    request: five numeric columns read into tensors at 3.6 million rows a
    second in slices of 65,536 rows, 2.0 million in slices of 16,384 (two
    cores shared with the server, a folder bucket)."""
    target = rows // (4 * world_size)
    if target >= 65536:
        return 65536
    if target >= 16384:
        return target // 16384 * 16384
    return max(1024, -(-target // 1024) * 1024)


def _as_is(batch: Any) -> Any:
    return batch


def _tensors(batch: Dict[str, Any]) -> Dict[str, Any]:
    return {name: _tensor(name, values) for name, values in batch.items()}


def _tensor(name: str, values: Any) -> Any:
    """A batch's column as a tensor (strings and binary as a list)."""
    if values.dtype == object:
        return values.tolist() if not np.ma.isMaskedArray(values) else [None if m else v for v, m in
                                                                          zip(values.data.tolist(), values.mask.tolist())]
    if np.ma.isMaskedArray(values):
        if values.dtype.kind != "f":
            raise ValueError(f"column {name!r} has nulls, which a {values.dtype} tensor cannot hold; "
                             f"filter them out (filter=\"{name} IS NOT NULL\") or leave the column out")
        values = values.filled(np.nan)
    if values.dtype.kind == "M":
        values = values.view(np.int64)
    elif values.dtype.kind == "u" and values.dtype.itemsize > 1:  # torch has uint8 alone: the next wider signed type
        if values.dtype.itemsize == 8 and len(values) and values.max() >= 1 << 63:
            raise ValueError(f"column {name!r} holds uint64 values past int64's range, which no tensor holds; leave the column out")
        values = values.astype(np.int32 if values.dtype.itemsize == 2 else np.int64)
    return torch.from_numpy(np.ascontiguousarray(values))
