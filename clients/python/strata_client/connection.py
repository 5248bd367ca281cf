"""A connection and table objects over a Strata server, or over a folder or
bucket with a server of its own that the connection starts and stops.

    import strata_client
    db = strata_client.connect("./lake")          # starts `strata serve` on loopback
    t = db.create_table("events", [{"id": 1, "msg": "hello"}])
    t.add([{"id": 2, "msg": "again"}])
    t.count_rows("id > 1")                         # 1, the rows just added included
    t.to_pandas()                                  # with pandas installed

Verbs are named as LanceDB's where they do the same (``table_names``,
``create_table``, ``open_table``, ``drop_table``; ``add``, ``count_rows``,
``to_pandas``, ``to_batches``, ``update``, ``delete``, ``merge_insert``,
``optimize``, ``list_versions``, ``checkout``, ``restore``). A connection
reads its own writes at once (see Client).
"""

from __future__ import annotations

import atexit
import datetime
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

from . import Client, StrataConnectionError, StrataError, _column_list

__all__ = ["connect", "Connection", "Table"]


def connect(uri: str, token: Optional[str] = None, **client_options: Any) -> "Connection":
    """A connection to the tables under ``uri``. An ``http://`` or ``https://``
    URI is a running ``strata serve`` (``token``: its bearer token). Anything
    else — a path (``./lake``), a ``file://``, ``s3://`` or ``gs://`` bucket URL —
    gets a server of its own: ``strata serve`` started as a child process on a
    loopback port with a random token (the ``strata`` binary from ``STRATA_BIN``,
    else from ``PATH``), stopped when the connection closes or the interpreter
    exits; it flushes and merges what it was sent before it stops. Keyword
    arguments go to :class:`Client`."""
    if uri.startswith(("http://", "https://")):
        return Connection(Client(uri, token=token, **client_options))
    server = _Server(_bucket_url(uri))
    try:
        client = Client(server.url, token=server.token, **client_options)
    except BaseException:
        server.stop()
        raise
    return Connection(client, server)


class Connection:
    """The tables of one server (see :func:`connect`). ``with connect(...) as db:``
    closes it."""

    def __init__(self, client: Client, server: Optional["_Server"] = None) -> None:
        self.client, self._server = client, server

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"Connection({self.client.base!r})"

    def close(self) -> None:
        """Let go of the client and stop the server the connection started, if
        any (it flushes and merges first)."""
        self.client.close()
        if self._server is not None:
            self._server.stop()

    def table_names(self) -> List[str]:
        """The names of the tables, sorted."""
        return sorted(t["name"] for t in self.client.tables())

    def create_table(self, name: str, data: Any = None, schema: Any = None, mode: str = "create",
                     exist_ok: bool = False) -> "Table":
        """Create table ``name`` and add ``data`` to it (dicts, a pandas DataFrame,
        or a pyarrow Table). The schema is ``schema`` — a list of
        ``{"name", "type", "nullable"?}``, a dict of name to type, or a pyarrow
        schema — or else inferred from ``data`` (every inferred column is
        nullable). ``exist_ok=True`` opens a table that exists instead of
        failing, as it is (``data`` is not added to it). ``mode="overwrite"``
        replaces the rows of a table that exists with ``data``, in one commit
        (its history stays): its columns must be the table's, by name and type
        (to change them, ``drop_table`` first, or alter the table)."""
        if mode not in ("create", "overwrite"):
            raise ValueError(f"mode {mode!r}: want 'create' or 'overwrite'")
        rows = _rows(data)
        fields = _fields(schema) if schema is not None else _infer(data, rows)
        if not fields:
            raise ValueError("create_table needs data or a schema")
        try:
            self.client.create_table(name, fields)
        except StrataError as e:
            if e.status != 409 or not (exist_ok or mode == "overwrite"):
                raise
            t = Table(self, name)
            if mode != "overwrite":
                return t  # as it is: a cell run again adds nothing twice
            have = [(f["name"], f["type"]) for f in t.schema]
            want = [(f["name"], f["type"]) for f in fields]
            if have != want:
                raise ValueError(f"create_table({name!r}, mode='overwrite'): the table has the columns {have} and the "
                                 f"new ones are {want}; an overwrite keeps the table's schema: drop_table({name!r}) first "
                                 "to change it, or alter the table") from None
            t.add(rows if rows is not None else [], mode="overwrite")
            return t
        t = Table(self, name)
        if rows is not None and len(rows) > 0:
            t.add(rows)  # data itself may be a generator that _rows read
        return t

    def open_table(self, name: str) -> "Table":
        """The table ``name``; a StrataError (404) when there is none."""
        t = Table(self, name)
        t.schema  # fails now rather than at the first read
        return t

    def drop_table(self, name: str) -> None:
        """Delete the table and every object in it."""
        self.client.drop(name)

    def __getitem__(self, name: str) -> "Table":
        return self.open_table(name)


class Table:
    """One table of a connection; ``version`` set: a view of that version
    (``checkout``), which reads but does not write."""

    def __init__(self, db: Connection, name: str, version: Optional[int] = None, tag: Optional[str] = None) -> None:
        self._db, self.name, self._version, self._tag = db, name, version, tag

    def __repr__(self) -> str:
        at = f", version={self._version}" if self._version else f", tag={self._tag!r}" if self._tag else ""
        return f"Table({self.name!r}{at})"

    @property
    def _c(self) -> Client:
        return self._db.client

    def _writable(self, verb: str) -> None:
        if self._version is not None or self._tag is not None:
            raise ValueError(f"{verb}: this is a view of an old version (checkout); checkout_latest() writes")

    # -- what it is -------------------------------------------------------

    @property
    def schema(self) -> List[Dict[str, Any]]:
        """The columns: ``[{"name", "type", "nullable"}, …]``."""
        return self._c.describe(self.name)["schema"]["fields"]

    @property
    def version(self) -> int:
        """The version read: the checked-out one, or the latest."""
        if self._version is not None:
            return self._version
        if self._tag is not None:
            return self.tags.list()[self._tag]
        return self._c.describe(self.name)["version"]

    def count_rows(self, filter: Optional[str] = None) -> int:
        """How many rows match ``filter`` (all without one), this connection's own
        appends included; from the table's statistics where they decide."""
        return self._c.count(self.name, filter=filter, version=self._version, tag=self._tag)

    def __len__(self) -> int:
        return self.count_rows()

    # -- reading ----------------------------------------------------------

    def scan(self, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
             limit: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """The rows as dicts, streamed."""
        return self._c.scan(self.name, columns=columns, filter=filter, version=self._version, tag=self._tag, limit=limit)

    def to_list(self, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """The rows as a list of dicts."""
        return list(self.scan(columns, filter, limit))

    def to_pandas(self, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                  limit: Optional[int] = None) -> Any:
        """The rows as a pandas DataFrame (see Client.scan_dataframe)."""
        return self._c.scan_dataframe(self.name, columns=columns, filter=filter, version=self._version,
                                      tag=self._tag, limit=limit)

    def to_arrow(self, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                 limit: Optional[int] = None) -> Any:
        """The rows as a pyarrow Table (needs pyarrow)."""
        return self._c.scan_arrow(self.name, columns=columns, filter=filter, version=self._version,
                                  tag=self._tag, limit=limit)

    def to_batches(self, batch_size: int = 65536, columns: Optional[Sequence[str]] = None,
                   filter: Optional[str] = None) -> Iterator[List[Dict[str, Any]]]:
        """The rows in lists of at most ``batch_size`` dicts, read from the server
        as they are asked for: the process holds one batch at a time, whatever
        the table's size."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        batch: List[Dict[str, Any]] = []
        for row in self.scan(columns, filter):
            batch.append(row)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def head(self, n: int = 5) -> List[Dict[str, Any]]:
        return self.to_list(limit=n)

    # -- writing ----------------------------------------------------------

    def add(self, data: Any, mode: str = "append") -> int:
        """Append rows (dicts, a pandas DataFrame, or a pyarrow Table), all or none;
        returns how many. Visible at once to this connection's reads.
        ``mode="overwrite"`` replaces every row of the table with ``data`` in one
        commit, keeping the schema (the history stays: ``checkout`` and
        ``restore`` reach the rows before)."""
        self._writable("add")
        if mode == "overwrite":
            return self._c.overwrite(self.name, data)["rows"]
        if mode != "append":
            raise ValueError(f"add(mode={mode!r}): want 'append' or 'overwrite'")
        return self._c.append(self.name, data)

    def update(self, where: Optional[str] = None, values: Optional[Mapping[str, Any]] = None,
               values_sql: Optional[Mapping[str, str]] = None) -> int:
        """Set columns in the rows matching ``where`` (every row without it), in
        one commit: those of ``values`` to constants (number, string, boolean,
        None), those of ``values_sql`` to expressions over the row's columns as
        a filter writes them (``{"reward": "reward * 2", "step": "step + 1"}``),
        each reading the row as it was before the update. Returns how many rows
        changed."""
        self._writable("update")
        if not values and not values_sql:
            raise ValueError("update needs values or values_sql")
        if where is None:
            col = _column_list([self.schema[0]["name"]])
            where = f"{col} IS NULL OR {col} IS NOT NULL"  # every row
        set_sql = ", ".join(f"{_column_list([c])} = {e}" for c, e in (values_sql or {}).items())
        return self._c.update(self.name, where, dict(values or {}), set_sql=set_sql or None)["updated"]

    def delete(self, where: str) -> int:
        """Delete the rows matching ``where``; returns how many."""
        self._writable("delete")
        return self._c.delete(self.name, where)["deleted"]

    def merge_insert(self, on: Any) -> "MergeInsert":
        """A merge by key column(s) ``on``, in one commit, one row per key:
        ``.when_matched_update_all(where=None)`` replaces the rows whose keys
        ``data`` holds, ``.when_not_matched_insert_all()`` inserts the others,
        ``.when_not_matched_by_source_delete(condition=None)`` deletes the rows
        whose keys ``data`` lacks; ``.execute(data)`` runs it."""
        self._writable("merge_insert")
        return MergeInsert(self, [on] if isinstance(on, str) else list(on))

    def add_columns(self, columns: Mapping[str, str]) -> None:
        """Add nullable columns, by name to type ({"grade": "string"})."""
        self._writable("add_columns")
        self._c.alter(self.name, add=dict(columns))

    def alter_columns(self, *changes: Mapping[str, Any]) -> None:
        """Change columns: each a dict with ``path`` (the column) and ``rename``
        (a new name), ``data_type`` (a wider type) or ``nullable`` (True)."""
        self._writable("alter_columns")
        out = []
        for ch in changes:
            col = ch["path"]
            if "rename" in ch:
                out.append({"op": "rename", "column": col, "to": ch["rename"]})
                col = ch["rename"]
            if "data_type" in ch:
                out.append({"op": "widen", "column": col, "type": ch["data_type"]})
            if ch.get("nullable"):
                out.append({"op": "widen", "column": col, "nullable": True})
        self._c.alter(self.name, changes=out)

    def drop_columns(self, names: Sequence[str]) -> None:
        self._writable("drop_columns")
        self._c.alter(self.name, drop=list(names))

    def create_index(self, column: str) -> None:
        self._c.create_index(self.name, column)

    def checkpoint(self) -> int:
        """Flush and merge until every row acknowledged so far is in a version of
        the table (reads need not wait for it: they see this connection's own
        writes at once); returns that version."""
        self._writable("checkpoint")
        self._c.checkpoint_lsm(self.name)
        return self.version

    def optimize(self, poll: float = 0.1, timeout: float = 600.0) -> Dict[str, Any]:
        """Compact the table's fragments and wait for it: returns
        ``{"fragments_before", "fragments_after", "version"}`` (no compaction ran
        when the two are equal)."""
        self._writable("optimize")
        before = self._c.compact_stats(self.name)["fragments"]
        try:
            self._c.compact(self.name)
        except StrataError as e:
            if e.code != "not_due":
                raise
        deadline = time.monotonic() + timeout
        while True:
            st = self._c.compact_stats(self.name)
            if not st["running"]:
                break
            if time.monotonic() > deadline:
                raise StrataError(0, "timeout", f"optimize of {self.name}: still running after {timeout:g} s")
            time.sleep(poll)
        return {"fragments_before": before, "fragments_after": st["fragments"], "version": self.version}

    def cleanup_old_versions(self, older_than: Any = None, *, delete_unverified: bool = False) -> Dict[str, Any]:
        """Delete the versions older than ``older_than`` (a ``timedelta`` or a
        string such as ``"168h"``; default two weeks, at least 5 minutes) but the
        latest and the tagged ones, and the objects only they use, with the
        collector's safety rules (what a named consumer has not read is kept).
        Objects no version references are deleted once an hour old, or five
        minutes with ``delete_unverified=True``. Returns ``{"bytes_removed",
        "old_versions", "objects_deleted", "boundary"}``."""
        self._writable("cleanup_old_versions")
        if older_than is None:
            older_than = datetime.timedelta(weeks=2)
        out = self._c.gc(self.name, keep_versions=1, retain=older_than,
                         safety_age="5m" if delete_unverified else None)
        return {"bytes_removed": out["bytes_freed"], "old_versions": out["versions_deleted"],
                "objects_deleted": out["objects_deleted"], "boundary": out["boundary"]}

    # -- versions ---------------------------------------------------------

    def list_versions(self, limit: int = 100) -> List[Dict[str, Any]]:
        """The newest versions first: ``{"version", "time", "kind", "rows", …}``."""
        out = self._c.versions(self.name, limit=limit, detail=True)
        return out["versions"] if isinstance(out, dict) else out

    def checkout(self, version: Optional[int] = None, tag: Optional[str] = None, as_of: Any = None) -> "Table":
        """A view of ``version`` (or the tagged version, or the newest version
        committed at or before ``as_of``: a ``datetime``, a ``timedelta`` before
        now, or a string such as ``"2026-12-07T10:00:00Z"`` or ``"2h"``) that
        reads as it was."""
        if sum(x is not None for x in (version, tag, as_of)) != 1:
            raise ValueError("checkout needs one of version=, tag= and as_of=")
        if as_of is not None:
            version = self._c.describe(self.name, as_of=as_of)["version"]
        return Table(self._db, self.name, version=version, tag=tag)

    def checkout_latest(self) -> "Table":
        return Table(self._db, self.name)

    def restore(self, version: Optional[int] = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """Commit a new version whose rows are ``version``'s (or the tagged one's;
        on a checked-out view, its own): ``{"version", "restored", "rows"}``."""
        if version is None and tag is None:
            version, tag = self._version, self._tag
        if version is None and tag is None:
            raise ValueError("restore needs version= or tag= (or a checked-out view)")
        return self._c.restore(self.name, version=version, tag=tag)

    @property
    def tags(self) -> "Tags":
        return Tags(self)

    # -- following ----------------------------------------------------------

    def changes(self, from_version: Optional[int] = None, to: Optional[int] = None, **kw: Any):
        """The rows inserted and deleted after ``from_version`` or ``from_as_of``
        (see Client.changes)."""
        return self._c.changes(self.name, from_version=from_version, to=to, **kw)

    def follow(self, **kw: Any):
        """Runs of changes as versions land (see Client.follow)."""
        return self._c.follow(self.name, **kw)


class Tags:
    """A table's tags: names of versions that garbage collection keeps."""

    def __init__(self, table: Table) -> None:
        self._t = table

    def list(self) -> Dict[str, int]:
        out = self._t._c.tags(self._t.name)
        return {t["name"]: t["version"] for t in (out["tags"] if isinstance(out, dict) else out)}

    def create(self, tag: str, version: int = 0) -> None:
        self._t._c.create_tag(self._t.name, tag, version)

    def delete(self, tag: str) -> None:
        self._t._c.delete_tag(self._t.name, tag)


class MergeInsert:
    """A merge by key, as LanceDB's ``merge_insert`` builds it (see
    Table.merge_insert): Strata runs it as an upsert with clauses, in one
    commit."""

    def __init__(self, table: Table, on: List[str]) -> None:
        self._t, self._on = table, on
        self._update, self._insert, self._delete = False, False, False
        self._update_if: Optional[str] = None
        self._delete_if: Optional[str] = None

    def when_matched_update_all(self, where: Optional[str] = None) -> "MergeInsert":
        """Replace the rows whose key a new row has (where ``where`` holds of the
        pair: ``target.COL`` the table's row, ``source.COL`` the new one)."""
        self._update, self._update_if = True, where
        return self

    def when_not_matched_insert_all(self) -> "MergeInsert":
        """Insert the new rows whose key the table lacks."""
        self._insert = True
        return self

    def when_not_matched_by_source_delete(self, condition: Optional[str] = None) -> "MergeInsert":
        """Delete the table's rows whose key no new row has (where ``condition``
        holds of them)."""
        self._delete, self._delete_if = True, condition
        return self

    def execute(self, data: Any) -> Dict[str, Any]:
        """Returns ``{"inserted", "updated", "replaced", "deleted", "version"}``:
        rows inserted, rows that updated their key's rows (``replaced`` of them),
        and the table's rows deleted for having no new row."""
        if not (self._update or self._insert or self._delete):
            raise ValueError("merge_insert: give at least one of when_matched_update_all(), "
                             "when_not_matched_insert_all() and when_not_matched_by_source_delete()")
        return self._t._c.upsert_with(
            self._t.name, data, self._on,
            when_matched="update" if self._update else "ignore", when_matched_if=self._update_if,
            when_not_matched="insert" if self._insert else "ignore",
            when_not_matched_by_source="delete" if self._delete else "keep",
            when_not_matched_by_source_if=self._delete_if)


# -- embedded server ------------------------------------------------------------


def _bucket_url(uri: str) -> str:
    if "://" in uri:
        return uri
    path = os.path.abspath(os.path.expanduser(uri))
    os.makedirs(path, exist_ok=True)
    return "file://" + path


class _Server:
    """``strata serve`` as a child process on a loopback port."""

    def __init__(self, bucket: str, start_timeout: float = 60.0) -> None:
        binary = os.environ.get("STRATA_BIN") or shutil.which("strata")
        if not binary:
            raise StrataConnectionError("connect: no strata binary to serve the tables: install it "
                                        "(go install github.com/stratadb/strata/cmd/...@latest) or set STRATA_BIN")
        self.token = secrets.token_urlsafe(24)
        instance = "py-%s-%d-%s" % (_host(), os.getpid(), secrets.token_hex(3))
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ, STRATA_TOKEN=self.token)
        self._proc = _spawn([binary, "serve", "--bucket", bucket, "--listen", "127.0.0.1:0", "--instance", instance,
                             "--log-level", "warn"], self._log, env)
        self.url = self._await_listening(bucket, start_timeout)
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._log)
        atexit.register(self._finalizer)
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _await_listening(self, bucket: str, timeout: float) -> str:
        found: List[str] = []

        def read() -> None:
            for line in self._proc.stdout:
                text = line.decode("utf-8", "replace")
                if "listening on " in text:
                    found.append(text.split("listening on ", 1)[1].split(",", 1)[0].strip())
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if found:
            return found[0]
        _stop(self._proc)
        self._log.seek(0)
        said = self._log.read().decode("utf-8", "replace").strip()
        self._log.close()
        self._proc.stdout.close()
        raise StrataConnectionError(f"connect: strata serve --bucket {bucket} did not start"
                                    + (f": {said}" if said else f" within {timeout:g} s"))

    def _drain_stdout(self) -> None:
        with self._proc.stdout:
            for _ in self._proc.stdout:
                pass

    def stop(self) -> None:
        self._finalizer()


def _stop(proc: subprocess.Popen, log: Any = None, grace: float = 150.0) -> None:
    """SIGTERM, then wait for the drain (flush and merge); SIGKILL after grace."""
    if log is not None:
        log.close()
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    except OSError:
        pass


def _spawn(args: List[str], log: Any, env: Dict[str, str]) -> subprocess.Popen:
    """Starts args from a thread that lives as long as the process (the
    child's parent-death signal follows the thread that started it, and a
    caller's thread may end before the connection does)."""
    out: List[Any] = []
    started = threading.Event()

    def keeper() -> None:
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env,
                                    preexec_fn=_die_with_parent)
        except BaseException as e:  # handed to the caller
            out.append(e)
            started.set()
            return
        out.append(proc)
        started.set()
        proc.wait()

    threading.Thread(target=keeper, daemon=True, name="strata serve").start()
    started.wait()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _die_with_parent() -> None:
    """In the child, before it runs strata: on Linux, a SIGTERM when the thread
    that started it ends — with the Python process, however it dies (SIGKILL
    included) — so that no server is left behind; it then drains and exits
    as on any SIGTERM."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _host() -> str:
    name = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in socket.gethostname())[:40]
    return name or "host"


# -- schemas ---------------------------------------------------------------------

_NUMPY_KINDS = {"i": "int64", "u": "uint64", "f": "float64", "b": "bool", "M": "timestamp_us"}


def _rows(data: Any) -> Optional[Sequence[Any]]:
    if data is None:
        return None
    if type(data).__module__.startswith(("pandas", "pyarrow")):
        return data  # has len()
    if isinstance(data, Mapping):
        raise TypeError("data: a list of dicts, a DataFrame or a pyarrow Table, not one dict")
    return list(data)


def _fields(schema: Any) -> List[Dict[str, Any]]:
    if isinstance(schema, Mapping):
        return [{"name": k, "type": v, "nullable": True} for k, v in schema.items()]
    if type(schema).__module__.startswith("pyarrow"):
        return [{"name": f.name, "type": _arrow_type(f.type), "nullable": f.nullable} for f in schema]
    return [dict(f) for f in schema]


def _arrow_type(t: Any) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return "timestamp_" + t.unit
    names = {pa.bool_(): "bool", pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
             pa.uint8(): "uint8", pa.uint16(): "uint16", pa.uint32(): "uint32", pa.uint64(): "uint64",
             pa.float32(): "float32", pa.float64(): "float64", pa.string(): "string",
             pa.large_string(): "large_string", pa.binary(): "binary", pa.large_binary(): "large_binary",
             pa.date32(): "date32"}
    if t in names:
        return names[t]
    raise TypeError(f"Arrow type {t} has no Strata column type")


def _infer(data: Any, rows: Optional[Sequence[Any]]) -> List[Dict[str, Any]]:
    if rows is None:
        return []
    module = type(data).__module__
    if module.startswith("pyarrow"):
        return _fields(data.schema)
    if module.startswith("pandas"):
        out = []
        for name, dtype in data.dtypes.items():
            kind = getattr(dtype, "kind", "O")
            t = _NUMPY_KINDS.get(kind)
            if str(dtype) in ("Int64", "Int32", "Int16", "Int8"):
                t = "int64"
            elif str(dtype) == "boolean":
                t = "bool"
            elif t is None:
                t = _infer_values(str(name), data[name].tolist())
            out.append({"name": str(name), "type": t, "nullable": True})
        return out
    names: List[str] = []
    for r in rows:
        for k in r:
            if k not in names:
                names.append(k)
    return [{"name": n, "type": _infer_values(n, [r.get(n) for r in rows]), "nullable": True} for n in names]


def _infer_values(name: str, values: List[Any]) -> str:
    kinds = set()
    for v in values:
        if v is None or v != v:  # None, NaN
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int64")
        elif isinstance(v, float):
            kinds.add("float64")
        elif isinstance(v, str):
            kinds.add("string")
        elif isinstance(v, (bytes, bytearray)):
            kinds.add("binary")
        elif isinstance(v, datetime.datetime):
            kinds.add("timestamp_us")
        elif isinstance(v, datetime.date):
            kinds.add("date32")
        elif hasattr(v, "item"):  # a numpy scalar
            kinds.add(_infer_values(name, [v.item()]))
        else:
            raise TypeError(f"column {name!r}: cannot tell a column type from {type(v).__name__} {v!r}: give schema=")
    if kinds == {"int64", "float64"}:
        return "float64"
    if len(kinds) > 1:
        raise TypeError(f"column {name!r} holds {' and '.join(sorted(kinds))} values: give schema=")
    if not kinds:
        raise TypeError(f"column {name!r} holds no values to tell its type from: give schema=")
    return kinds.pop()
