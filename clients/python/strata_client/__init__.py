"""A Python client for the Strata HTTP server (``strata serve``).

Standard library only for the JSON-lines path; Arrow IPC appends and scans
when ``pyarrow`` is importable. Every method maps to one route under
``/api/v1``; errors raise :class:`StrataError` with the HTTP status and the
server's error code.

    from strata_client import Client
    c = Client("http://127.0.0.1:8080")
    c.create_table("events", [{"name": "id", "type": "int64"}, {"name": "msg", "type": "string", "nullable": True}])
    c.append("events", [{"id": 1, "msg": "hello"}])
    c.checkpoint_lsm("events")
    for row in c.scan("events", filter="id >= 1"):
        print(row)
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import random
import re
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["Client", "StrataError", "StrataConnectionError"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"

# Rows to write: dicts (JSON), or a pyarrow Table or RecordBatch.
Rows = Union[Iterable[Mapping[str, Any]], Any]


class StrataError(Exception):
    """An error answer: ``status`` (HTTP), ``code`` and ``message`` (the server's)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"strata: {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class StrataConnectionError(StrataError):
    """No answer: the server could not be reached, did not answer in time, or
    the connection dropped mid-answer (``status`` 0, ``code`` "connection").
    An unnamed request may or may not have been acted on; a named one (see
    Client) was sent again for ``retry_for`` seconds first."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "connection", message)


class Client:
    """A client of one server. ``retries`` bounds the retries of a 429 or 503 answer.

    Requests that carry rows (``append``, ``create_table``) are named (the
    ``Strata-Producer`` and ``Strata-Sequence`` headers), so that the server stores
    a request sent again only once: each request takes a lane — a producer with a
    random identity that numbers its requests — for as long as it runs, so that a
    request sent again is always its lane's newest (the server keeps a few numbers
    per producer); a client has as many lanes as requests it ran at once. Such a request is sent again after any failure
    that leaves its outcome unknown — a lost connection, a timeout, 429, 502, 503,
    504, ``outcome_unknown`` — for up to ``retry_for`` seconds. ``append(...,
    idempotency_key=K)`` names an append with a key of the caller's instead, for
    retries across the caller's own restarts. ``names=False`` sends them unnamed."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """Let go of what the client holds (its request lanes); ``with
        Client(...) as c:`` calls it."""
        with self._lanes_lock:
            self._lanes.clear()

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5,
                 retry_for: float = 30.0, names: bool = True) -> None:
        self.base = base_url.rstrip("/")
        self.token, self.timeout, self.retries = token, timeout, retries
        self.retry_for, self.names = retry_for, names
        self._lanes, self._lanes_lock = [], threading.Lock()

    @contextlib.contextmanager
    def _named(self, key=None):
        """The name of a request with rows: ``key``, or the next number of a lane
        held for the request's whole life (see the class)."""
        if key is not None or not self.names:
            yield None if key is None else {"Idempotency-Key": key}
            return
        with self._lanes_lock:
            lane = self._lanes.pop() if self._lanes else [secrets.token_hex(16), 0]
        lane[1] += 1
        try:
            yield {"Strata-Producer": lane[0], "Strata-Sequence": str(lane[1])}
        finally:
            with self._lanes_lock:
                self._lanes.append(lane)

    # -- plumbing -------------------------------------------------------

    def _url(self, path, query=None):
        u = self.base + path
        if query:
            q = {k: v for k, v in query.items() if v is not None and v is not False}
            if q:
                u += "?" + urllib.parse.urlencode({k: ("true" if v is True else v) for k, v in q.items()})
        return u

    def _table(self, name, rest=""):
        return "/api/v1/tables/" + urllib.parse.quote(name, safe="") + rest

    def _open(self, method, path, query=None, body=None, ctype=None, accept=None, retries=None, name=None):
        """Send a request; ``name``, headers that make sending it again safe, also
        retries failures that leave its outcome unknown, for ``retry_for`` seconds."""
        retries = self.retries if retries is None else retries
        url = self._url(path, query)
        start = time.monotonic()
        for attempt in itertools.count():
            req = urllib.request.Request(url, data=body, method=method)
            if ctype:
                req.add_header("Content-Type", ctype)
            if accept:
                req.add_header("Accept", accept)
            if self.token:
                req.add_header("Authorization", "Bearer " + self.token)
            for k, v in (name or {}).items():
                req.add_header(k, v)
            in_time = time.monotonic() - start < self.retry_for
            try:
                return urllib.request.urlopen(req, timeout=self.timeout)
            except urllib.error.HTTPError as e:
                data = e.read()
                if name is not None:
                    again = e.code in (429, 502, 503, 504) and in_time
                else:
                    # Unnamed, an append answered outcome_unknown may be stored
                    # already: sent again, its rows could be stored twice.
                    again = e.code in (429, 503) and attempt < retries and b'"outcome_unknown"' not in data
                if not again:
                    raise _error(e.code, data) from None
                wait = e.headers.get("Retry-After")
                delay = float(wait) if wait and wait.isdigit() else min(0.05 * 2**attempt, 2.0)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                # No answer: the request may or may not have been acted on.
                if name is None or not in_time:
                    raise StrataConnectionError(f"{method} {url}: {getattr(e, 'reason', e)}") from e
                delay = min(0.05 * 2**attempt, 2.0)
            time.sleep(delay * (0.5 + random.random()))
        raise AssertionError("unreachable")

    def _json(self, method, path, query=None, payload=None, retries=None, name=None):
        body = None if payload is None else json.dumps(payload).encode()
        with self._open(method, path, query, body, "application/json" if body is not None else None, retries=retries, name=name) as r:
            data = _read(r)
        return json.loads(data) if data else None

    # -- tables ---------------------------------------------------------

    def tables(self) -> List[Dict[str, Any]]:
        """The server's tables: a list of ``{"name", "version"}``."""
        return self._json("GET", "/api/v1/tables")["tables"]

    def create_table(self, name: str, fields: List[Dict[str, Any]]) -> Dict[str, Any]:
        """Create a table from a JSON schema: ``[{"name", "type", "nullable"?}, …]``."""
        with self._named() as req_name:
            return self._json("PUT", self._table(name), payload={"fields": fields}, name=req_name)

    def describe(self, name: str) -> Dict[str, Any]:
        return self._json("GET", self._table(name))

    def drop(self, name: str) -> None:
        self._json("DELETE", self._table(name))

    # -- rows -----------------------------------------------------------

    def append(self, name: str, rows: Rows, ignore_unknown: bool = False, idempotency_key: Optional[str] = None) -> int:
        """Append rows, all or none: an iterable of dicts (sent as JSON lines), or
        a pyarrow Table or RecordBatch (sent as an Arrow IPC stream). Returns the
        number of rows acknowledged, durable in the server's WAL. The request is
        named (see the class), by ``idempotency_key`` when given: sent again with
        the same key, even by another client, it stores nothing and answers the
        first append's count; the same key with other rows raises StrataError
        ``idempotency_key_reused`` (422)."""
        query = {"ignore_unknown": ignore_unknown}
        if _is_arrow(rows):
            body, ctype = _arrow_stream(rows), ARROW_STREAM
        else:
            body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
            ctype = NDJSON
        with self._named(idempotency_key) as req_name, \
                self._open("POST", self._table(name, "/rows"), query, body, ctype, name=req_name) as r:
            return json.loads(_read(r))["rows"]

    def upsert(self, name: str, rows: Rows, key: Union[str, Sequence[str]], ignore_unknown: bool = False,
               through_shard: bool = False) -> Dict[str, Any]:
        """Write rows and, in the same commit, delete every row of the table whose
        key — its values in the column ``key`` (a name, or a list of names) — one
        of them has. Rows as for ``append``; a key must not be null nor appear
        twice among them. Returns ``{"rows", "replaced", "version"}``. Sent again,
        an upsert replaces its own rows, so failures that leave its outcome
        unknown are retried, as a named append's are.

        With ``through_shard=True`` the rows go through the server's WAL shard
        as an append's do: acknowledged once durable there (``version`` is 0,
        ``replaced`` unknown: 0), visible at once to a fresh scan, and the
        shard's merge replaces the table's rows with their keys."""
        keys = [key] if isinstance(key, str) else list(key)
        query = {"mode": "upsert", "key": ",".join(keys), "ignore_unknown": ignore_unknown}
        if through_shard:
            query["through"] = "shard"
        if _is_arrow(rows):
            body, ctype = _arrow_stream(rows), ARROW_STREAM
        else:
            body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()
            ctype = NDJSON
        with self._open("POST", self._table(name, "/rows"), query, body, ctype, name={}) as r:
            out = json.loads(_read(r))
        return {"rows": out["rows"], "replaced": out.get("replaced", 0), "version": out.get("version", 0)}

    def scan(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None, version: Optional[int] = None,
             tag: Optional[str] = None, limit: Optional[int] = None, fresh: bool = False) -> Iterator[Dict[str, Any]]:
        """Iterate over the rows as dicts, streamed as JSON lines. A scan cut short
        by the server raises rather than ending early."""
        query = _scan_query(columns, filter, version, tag, limit, fresh)
        query["format"] = "jsonl"
        resp = self._open("GET", self._table(name, "/rows"), query, accept=NDJSON)
        return _lines(resp)

    def scan_arrow(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                   version: Optional[int] = None, tag: Optional[str] = None, limit: Optional[int] = None,
                   fresh: bool = False) -> Any:
        """The rows as a pyarrow Table (needs pyarrow)."""
        import pyarrow.ipc as ipc

        query = _scan_query(columns, filter, version, tag, limit, fresh)
        with self._open("GET", self._table(name, "/rows"), query, accept=ARROW_STREAM) as r:
            return ipc.open_stream(_read(r)).read_all()

    def take(self, name: str, keys: Sequence[Any], column: str = "id", columns: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
        """The rows whose ``column`` holds one of ``keys``, as dicts."""
        payload = {"column": column, "keys": list(keys)}
        if columns:
            payload["columns"] = list(columns)
        body = json.dumps(payload).encode()
        resp = self._open("POST", self._table(name, "/take"), {"format": "jsonl"}, body, "application/json", accept=NDJSON)
        return list(_lines(resp))

    def update(self, name: str, filter: str, set: Mapping[str, Any]) -> Dict[str, Any]:
        """Set columns of the rows matching ``filter`` to the values of the dict
        ``set`` (numbers, strings, booleans, None for null), in one commit.
        Returns ``{"updated", "version"}``."""
        return self._json("PATCH", self._table(name, "/rows"), {"filter": filter}, payload={"set": set})

    def delete(self, name: str, filter: str) -> Dict[str, Any]:
        """Delete the rows matching ``filter``: ``{"deleted", "version"}``."""
        return self._json("DELETE", self._table(name, "/rows"), {"filter": filter})

    # -- versions and tags ------------------------------------------------

    def versions(self, name: str, limit: int = 20, detail: bool = False) -> Any:
        return self._json("GET", self._table(name, "/versions"), {"limit": limit, "detail": "true" if detail else "false"})

    def tags(self, name: str) -> Any:
        return self._json("GET", self._table(name, "/tags"))

    def create_tag(self, name: str, tag: str, version: int = 0) -> Dict[str, Any]:
        """Name a version (0: the latest); returns the tag with its time."""
        return self._json("POST", self._table(name, "/tags"), payload={"name": tag, "version": version})

    def restore(self, name: str, version: Optional[int] = None, tag: Optional[str] = None) -> Dict[str, Any]:
        """Commit a new version whose rows are ``version``'s (or the tagged
        version's): ``{"version", "restored", "rows"}``."""
        payload = {"version": version} if tag is None else {"tag": tag}
        return self._json("POST", self._table(name, "/restore"), payload=payload)

    def delete_tag(self, name: str, tag: str) -> None:
        self._json("DELETE", self._table(name, "/tags/" + urllib.parse.quote(tag, safe="")))

    # -- following a table ----------------------------------------------

    def changes(self, name: str, from_version: Optional[int] = None, consumer: Optional[str] = None, to: Optional[int] = None,
                wait: Optional[float] = None, columns: Optional[Sequence[str]] = None) -> Tuple[List[Dict[str, Any]], int]:
        """The rows inserted and deleted after ``from_version`` (or after the named
        ``consumer``'s position), through ``to`` (the latest by default), as
        ``(rows, through)``: dicts with ``_change`` ("insert" or "delete") and
        ``_version``, and the version read through — ask from it next time to read
        every change once. ``wait`` (seconds, at most 60) waits for a new version
        when there is none. A range garbage collection removed raises StrataError
        with status 410 (``version_collected``) naming the oldest version left."""
        if from_version is None and consumer is None:
            raise ValueError("changes need from_version or consumer")
        query = {"format": "jsonl"}
        if from_version is not None:
            query["from"] = from_version
        if consumer is not None:
            query["consumer"] = consumer
        if to is not None:
            query["to"] = to
        if wait:
            query["wait"] = "%gs" % wait
        if columns:
            query["columns"] = _column_list(columns)
        resp = self._open("GET", self._table(name, "/changes"), query, accept=NDJSON)
        through = int(resp.headers.get("Strata-Version", "0"))
        return list(_lines(resp)), through

    def follow(self, name: str, consumer: Optional[str] = None, from_version: Optional[int] = None, wait: float = 30,
               columns: Optional[Sequence[str]] = None) -> Iterator[Dict[str, Any]]:
        """Yield ``(rows, through)`` as versions land, forever: each a run of
        changes and the version read through (``rows`` may be empty). With
        ``consumer`` it starts after the consumer's position (``from_version``
        when it has none) and records the new position once the caller asks for
        the next run — having done what it does with this one."""
        position = from_version
        if consumer is not None:
            known = {c["name"]: c["version"] for c in self.consumers(name)}
            if consumer in known:
                position = known[consumer]
        if position is None:
            raise ValueError("follow needs from_version, or a consumer with a recorded position")
        while True:
            rows, through = self.changes(name, from_version=position, wait=wait, columns=columns)
            if through > position or rows:
                yield rows, through
                if consumer is not None and through > position:
                    self.set_consumer(name, consumer, through)
            position = max(position, through)

    def consumers(self, name: str) -> Any:
        """The named consumers: ``{"name", "version", "updated", "lag_versions"}``."""
        return self._json("GET", self._table(name, "/consumers"))

    def set_consumer(self, name: str, consumer: str, version: int) -> Dict[str, Any]:
        """Record that ``consumer`` has read every change through ``version``."""
        path = self._table(name, "/consumers/" + urllib.parse.quote(consumer, safe=""))
        return self._json("PUT", path, payload={"version": version})

    def delete_consumer(self, name: str, consumer: str) -> None:
        self._json("DELETE", self._table(name, "/consumers/" + urllib.parse.quote(consumer, safe="")))

    # -- key indexes ------------------------------------------------------

    def create_index(self, name: str, column: str) -> Dict[str, Any]:
        """Build a key index of an integer column; ``take`` reads it, through compactions."""
        return self._json("POST", self._table(name, "/indexes"), payload={"column": column})

    def alter(self, name: str, *, add: Optional[Mapping[str, str]] = None, rename: Optional[Mapping[str, str]] = None,
              widen: Optional[Mapping[str, str]] = None, drop: Optional[Sequence[str]] = None,
              changes: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        """Change the table's columns in one commit, by metadata alone; rows
        written before read under the new schema. ``add`` maps new column
        names to types ({"grade": "string"}; added columns are nullable),
        ``rename`` old names to new, ``widen`` names to a wider type or
        "nullable", ``drop`` is a list of names; they apply in the order
        rename, widen, drop, add. ``changes`` gives the request's own list
        instead ({"op": "add", "column": ..., "type": ...}). Returns the
        table as it is after."""
        if changes is None:
            changes = [{"op": "rename", "column": k, "to": v} for k, v in (rename or {}).items()]
            for k, v in (widen or {}).items():
                changes.append({"op": "widen", "column": k, "nullable": True} if v == "nullable"
                               else {"op": "widen", "column": k, "type": v})
            changes += [{"op": "drop", "column": k} for k in (drop or [])]
            changes += [{"op": "add", "column": k, "type": v} for k, v in (add or {}).items()]
        return self._json("POST", self._table(name, "/schema"), payload={"changes": changes})

    def indexes(self, name: str) -> List[Dict[str, Any]]:
        return self._json("GET", self._table(name, "/indexes"))["indexes"]

    # -- compaction -------------------------------------------------------

    def compact(self, name: str, min_fragments: Optional[int] = None, target_rows: Optional[int] = None,
                target_bytes: Optional[int] = None, dry_run: bool = False, force: bool = False) -> Any:
        """Start a compaction (202), or with ``dry_run`` return its plan. A 409
        (another compactor holds the lease, or not due) raises StrataError."""
        payload = {k: v for k, v in {"min_fragments": min_fragments, "target_rows": target_rows,
                                     "target_bytes": target_bytes, "dry_run": dry_run, "force": force}.items() if v}
        return self._json("POST", self._table(name, "/compact"), payload=payload or None, retries=0)

    def compact_stats(self, name: str) -> Dict[str, Any]:
        return self._json("GET", self._table(name, "/compact/stats"))

    # -- LSM ------------------------------------------------------------------

    def flush(self, name: str) -> None:
        """Ask the server to seal its memtable into a generation (202)."""
        self._json("POST", self._table(name, "/lsm/flush"))

    def merge(self, name: str) -> None:
        """Ask the server for a fleet merge (202): every shard's flushed generations
        installed in the table (POST …/lsm/merge); a 429 (one running) raises. A
        merge rewrites no fragment: that is ``compact``."""
        self._json("POST", self._table(name, "/lsm/merge"), retries=0)

    def lsm_stats(self, name: str, include_generation_rows: bool = False) -> Dict[str, Any]:
        return self._json("GET", self._table(name, "/lsm/stats"), {"include_generation_rows": include_generation_rows})

    def checkpoint_lsm(self, name: str, poll: float = 0.05, max_stalls: int = 40) -> None:
        """Flush and merge until every generation that existed when it began (and
        every row the server acknowledged before) is in the table, as the Go
        client's CheckpointLSM: the server's WAL flushed up to the last entry
        acknowledged before the checkpoint, then every shard's watermark at or
        above its newest generation then, merged by anyone. Raises when no
        progress is seen in ``max_stalls`` polls."""
        before = self.lsm_stats(name)
        self.flush(name)
        sealing = {s["shard"]: s["wal_last_written"] for s in before["shards"] if s.get("memtable_rows")}
        stalls = 0
        while True:
            st = self.lsm_stats(name)
            target = {s["shard"]: s["newest_generation"] for s in st["shards"]}
            # Still holding an entry written before the checkpoint began (the
            # flushed position alone misses a fence written on reopening).
            waiting = sum(1 for s in st["shards"] if s["shard"] in sealing
                          and 0 < s.get("memtable_from", 0) <= sealing[s["shard"]])
            if waiting == 0:
                break
            if stalls >= max_stalls:
                raise StrataError(0, "checkpoint_stalled", f"checkpoint of {name}: the flush made no generation in {stalls} polls")
            if stalls % 10 == 9:
                self.flush(name)
            stalls += 1
            time.sleep(poll)

        def outstanding():
            st = self.lsm_stats(name)
            n = sum(max(0, target[s["shard"]] - s["watermark"]) for s in st["shards"] if s["shard"] in target)
            merging = st.get("merging", False) or any(s.get("merging", s.get("compacting")) for s in st["shards"])
            return n, merging

        last, merging = outstanding()
        stalls = 0
        while last > 0:
            if not merging:
                try:
                    self.merge(name)
                except StrataError as e:
                    if e.status != 429:
                        raise
            time.sleep(poll)
            n, merging = outstanding()
            if n < last or merging:
                stalls = 0
            else:
                stalls += 1
                if stalls >= max_stalls:
                    raise StrataError(0, "checkpoint_stalled",
                                      f"checkpoint of {name} made no progress in {stalls} polls: {n} generations at or below the target still await merging")
            last = n


def _error(status, data):
    """The StrataError of an error answer's body."""
    try:
        err = json.loads(data)["error"]
        return StrataError(status, err.get("code", ""), err.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return StrataError(status, "", data.decode("utf-8", "replace"))


def _scan_query(columns, filter, version, tag, limit, fresh):
    return {"columns": _column_list(columns) if columns else None, "filter": filter, "version": version,
            "tag": tag, "limit": limit, "fresh": fresh}


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _column_list(names):
    """Names as ``columns=`` reads them: separated by commas, a name other than a
    plain word between backticks with each backtick doubled (joined bare, a name
    holding a comma would read as two columns)."""
    return ",".join(n if _PLAIN_NAME.fullmatch(n) else "`" + n.replace("`", "``") + "`" for n in names)


def _read(resp):
    """The body of an answer; a connection dropped while reading it is a
    StrataConnectionError."""
    try:
        return resp.read()
    except (http.client.HTTPException, OSError) as e:
        raise StrataConnectionError(f"reading the answer: {e}") from e


def _lines(resp):
    with resp:
        try:
            for line in resp:
                if line.strip():
                    yield json.loads(line)
        except (http.client.HTTPException, OSError) as e:
            raise StrataConnectionError(f"reading the rows: {e}") from e


def _is_arrow(rows):
    try:
        import pyarrow as pa
    except ImportError:
        return False
    return isinstance(rows, (pa.Table, pa.RecordBatch))


def _arrow_stream(rows):
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as w:
        w.write(rows)
    return sink.getvalue().to_pybytes()
