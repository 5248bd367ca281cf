"""A Python client for the Strata HTTP server (``strata serve``).

Standard library only for the JSON-lines path; pandas DataFrames in and out
(``append``, ``scan_dataframe``) when ``pandas`` is importable, Arrow IPC
appends and scans when ``pyarrow`` is. Requests share kept-alive connections. Every method maps to one route under
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

import base64
import contextlib
import datetime
import http.client
import io
import itertools
import json
import random
import re
import secrets
import ssl
import threading
import time
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["Client", "Connection", "Table", "StrataError", "StrataConnectionError", "connect"]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"
CSV = "text/csv"

# Rows to write: dicts (JSON), a pandas DataFrame, or a pyarrow Table or RecordBatch.
Rows = Union[Iterable[Mapping[str, Any]], Any]


class StrataError(Exception):
    """An error answer: ``status`` (HTTP), ``code`` and ``message`` (the server's)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"strata: {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class StrataTLSError(StrataError):
    """The TLS handshake failed (``status`` 0, ``code`` "tls"): the server's
    certificate is not signed by a CA the client trusts (``ca=``), not made
    for the URL's host, or the server asked for a client certificate
    (``cert=``, ``key=``). It is not sent again: it would fail again."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "tls", message)


def _tls_context(ca: Optional[str], cert: Optional[str], key: Optional[str]) -> Optional[ssl.SSLContext]:
    """The context of an https:// client: the server verified against the CA
    certificates in ``ca`` (PEM; the system's roots when None), and the
    client's own ``cert`` and ``key`` for a server with mutual TLS."""
    if ca is None and cert is None and key is None:
        return None
    if (cert is None) != (key is None):
        raise ValueError("a client certificate needs its key (cert= and key=)")
    ctx = ssl.create_default_context(cafile=ca)
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


def _tls_refused(e: ssl.SSLError) -> bool:
    """Whether e is a refused handshake (a certificate not trusted, or the
    server's alert that it wants or refuses the client's), not a connection
    cut mid-answer (an unexpected EOF), which is worth sending again."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return True
    words = str(e).upper()
    return any(a in words for a in ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN",
                                    "UNSUPPORTED_PROTOCOL", "WRONG_VERSION_NUMBER", "HANDSHAKE_FAILURE"))


def _tls_words(e: ssl.SSLError) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"the server's certificate is not trusted ({e.verify_message}): give its CA with ca="
    if "CERTIFICATE_REQUIRED" in str(e) or "certificate required" in str(e):
        return f"the server asks for a client certificate: give cert= and key= ({e})"
    return str(e)


class StrataConnectionError(StrataError):
    """No answer: the server could not be reached, did not answer in time, or
    the connection dropped mid-answer (``status`` 0, ``code`` "connection").
    An unnamed request may or may not have been acted on; a named one (see
    Client) was sent again for ``retry_for`` seconds first."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "connection", message)


class Client:
    """A client of one server. ``retries`` bounds the retries of a 429 or 503 answer;
    one with ``Retry-After`` (the server's memory budget is held) is sent again no
    sooner than it asks, and not at all when that would end past ``retry_for``.

    Requests that carry rows (``append``, ``create_table``) are named (the
    ``Strata-Producer`` and ``Strata-Sequence`` headers), so that the server stores
    a request sent again only once: each request takes a lane — a producer with a
    random identity that numbers its requests — for as long as it runs, so that a
    request sent again is always its lane's newest (the server keeps a few numbers
    per producer); a client has as many lanes as requests it ran at once. Such a request is sent again after any failure
    that leaves its outcome unknown — a lost connection, a timeout, 429, 502, 503,
    504, ``outcome_unknown`` — for up to ``retry_for`` seconds. ``append(...,
    idempotency_key=K)`` names an append with a key of the caller's instead, for
    retries across the caller's own restarts. ``names=False`` sends them unnamed.

    A client reads its own appends at once: each append's answer names the WAL
    entry that holds its rows, and reads of the latest version (``scan``,
    ``scan_dataframe``, ``scan_arrow``, ``describe``) name the newest entry of
    each shard the client wrote to (``written=``), so that the server adds the
    rows not merged yet, from whichever replica answers. Other clients see them
    once merged. ``own_writes=False`` reads only what is merged."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """Let go of what the client holds (its request lanes, its kept-alive
        connections); ``with Client(...) as c:`` calls it."""
        with self._lanes_lock:
            self._lanes.clear()
        self._conns.close()

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 60.0, retries: int = 5,
                 retry_for: float = 30.0, names: bool = True, own_writes: bool = True,
                 ca: Optional[str] = None, cert: Optional[str] = None, key: Optional[str] = None) -> None:
        self.base = base_url.rstrip("/")
        self.token, self.timeout, self.retries = token, timeout, retries
        self.retry_for, self.names, self.own_writes = retry_for, names, own_writes
        # Each table's shards' newest WAL positions this client's appends were
        # acknowledged at: reads name them (written=), so that they hold the
        # client's own writes before the merge installs them.
        self._written, self._written_lock = {}, threading.Lock()
        self._lanes, self._lanes_lock = [], threading.Lock()
        self._conns = _Connections(self.base, timeout, tls=_tls_context(ca, cert, key))

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

    def _wrote(self, name, out):
        shard, pos = out.get("shard"), out.get("position")
        if shard and pos:
            with self._written_lock:
                mine = self._written.setdefault(name, {})
                mine[shard] = max(mine.get(shard, 0), pos)

    def _reads_own(self, name, query):
        """Add ``written=`` to a read of the latest version of ``name``."""
        if not self.own_writes or query.get("version") or query.get("tag") or query.get("as_of") or query.get("fresh"):
            return query
        with self._written_lock:
            mine = sorted(self._written.get(name, {}).items())
        if mine:
            query["written"] = ",".join("%s:%d" % (shard, pos) for shard, pos in mine)
        return query

    def _url(self, path, query=None):
        u = self._conns.prefix + path
        if query:
            q = {k: v for k, v in query.items() if v is not None and v is not False}
            if q:
                u += "?" + urllib.parse.urlencode({k: ("true" if v is True else v) for k, v in q.items()})
        return u

    def _table(self, name, rest=""):
        return "/api/v1/tables/" + urllib.parse.quote(name, safe="") + rest

    def _open(self, method, path, query=None, body=None, ctype=None, accept=None, retries=None, name=None):
        """Send a request on a kept-alive connection; ``name``, headers that make
        sending it again safe, also retries failures that leave its outcome
        unknown, for ``retry_for`` seconds."""
        retries = self.retries if retries is None else retries
        target = self._url(path, query)
        headers = {}
        if ctype:
            headers["Content-Type"] = ctype
        if accept:
            headers["Accept"] = accept
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        headers.update(name or {})
        start = time.monotonic()
        for attempt in itertools.count():
            in_time = time.monotonic() - start < self.retry_for
            try:
                resp = self._conns.send(method, target, body, headers)
            except (http.client.HTTPException, OSError) as e:
                if isinstance(e, ssl.SSLError) and _tls_refused(e):
                    # The handshake failed: sent again, it fails again.
                    raise StrataTLSError(f"{method} {self.base}{path}: {_tls_words(e)}") from e
                # No answer: the request may or may not have been acted on
                # (a TLS connection cut mid-answer too).
                if name is None or not in_time:
                    raise StrataConnectionError(f"{method} {self.base}{path}: {e}") from e
                delay = min(0.05 * 2**attempt, 2.0)
            else:
                if resp.status < 400:
                    return resp
                data = _read(resp)
                resp.close()
                if name is not None:
                    again = resp.status in (429, 502, 503, 504) and in_time
                else:
                    # Unnamed, an append answered outcome_unknown may be stored
                    # already: sent again, its rows could be stored twice.
                    again = resp.status in (429, 503) and attempt < retries and b'"outcome_unknown"' not in data
                wait = resp.headers.get("Retry-After")
                if wait and wait.strip().isdigit():
                    # The server said when to come back: not before, and not
                    # past the time this request may take.
                    asked = float(wait)
                    again = again and time.monotonic() - start + asked <= self.retry_for
                    delay = asked * (1 + random.random() / 2)
                else:
                    delay = min(0.05 * 2**attempt, 2.0) * (0.5 + random.random())
                if not again:
                    raise _error(resp.status, data) from None
                time.sleep(delay)
                continue
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

    def describe(self, name: str, version: Optional[int] = None, tag: Optional[str] = None,
                 as_of: Any = None) -> Dict[str, Any]:
        """The table's schema, version and size (of the latest version, or of
        ``version``, ``tag`` or ``as_of``'s); ``rows`` of the latest counts this
        client's own appends not merged yet too (unless ``own_writes=False``)."""
        query = {"version": version, "tag": tag, "as_of": _as_of(as_of)}
        return self._json("GET", self._table(name), query=self._reads_own(name, query))

    def drop(self, name: str) -> None:
        with self._written_lock:
            self._written.pop(name, None)
        self._json("DELETE", self._table(name))

    # -- rows -----------------------------------------------------------

    def append(self, name: str, rows: Rows, ignore_unknown: bool = False, idempotency_key: Optional[str] = None) -> int:
        """Append rows, all or none: an iterable of dicts or a pandas DataFrame
        (sent as JSON lines; a float NaN or ±inf as itself, a missing value as
        null), or a pyarrow Table or RecordBatch (sent as an Arrow IPC stream). Returns the
        number of rows acknowledged, durable in the server's WAL. The request is
        named (see the class), by ``idempotency_key`` when given: sent again with
        the same key, even by another client, it stores nothing and answers the
        first append's count; the same key with other rows raises StrataError
        ``idempotency_key_reused`` (422)."""
        query = {"ignore_unknown": ignore_unknown}
        body, ctype = _body(rows)
        with self._named(idempotency_key) as req_name, \
                self._open("POST", self._table(name, "/rows"), query, body, ctype, name=req_name) as r:
            out = json.loads(_read(r))
        self._wrote(name, out)
        return out["rows"]

    def overwrite(self, name: str, rows: Rows, ignore_unknown: bool = False, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """Replace every row of the table with ``rows`` (as for ``append``; none
        leaves the table empty), keeping its schema, in one commit: returns
        ``{"rows", "version"}``. Rows other writers acknowledged through shards
        and not yet merged land on top of it. The request is named as an append
        is (by ``idempotency_key`` when given), so sent again after a lost answer
        it overwrites nothing and never drops rows written after it landed."""
        query = {"mode": "overwrite", "ignore_unknown": ignore_unknown}
        body, ctype = _body(rows)
        with self._named(idempotency_key) as req_name, \
                self._open("POST", self._table(name, "/rows"), query, body, ctype, name=req_name) as r:
            out = json.loads(_read(r))
        self._wrote(name, out)
        return {"rows": out["rows"], "version": out.get("version", 0)}

    def upsert(self, name: str, rows: Rows, key: Union[str, Sequence[str]], ignore_unknown: bool = False,
               through_shard: bool = False) -> Dict[str, Any]:
        """Write rows and, in the same commit, delete every row of the table whose
        key — its values in the column ``key`` (a name, or a list of names) — one
        of them has. Rows as for ``append``; a key must not be null nor appear
        twice among them. Returns ``{"rows", "replaced", "version"}``. The request
        is named as an append is, so failures that leave its outcome unknown are
        retried, and a retry changes nothing once the first landed: it never
        undoes a later upsert of its keys.

        With ``through_shard=True`` the rows go through the server's WAL shard
        as an append's do: acknowledged once durable there (``version`` is 0,
        ``replaced`` unknown: 0), visible at once to a fresh scan, and the
        shard's merge replaces the table's rows with their keys."""
        keys = [key] if isinstance(key, str) else list(key)
        query = {"mode": "upsert", "key": ",".join(keys), "ignore_unknown": ignore_unknown}
        if through_shard:
            query["through"] = "shard"
        body, ctype = _body(rows)
        with self._named(None) as req_name, \
                self._open("POST", self._table(name, "/rows"), query, body, ctype, name=req_name) as r:
            out = json.loads(_read(r))
        self._wrote(name, out)
        return {"rows": out["rows"], "replaced": out.get("replaced", 0), "version": out.get("version", 0)}

    def upsert_with(self, name: str, rows: Rows, key: Union[str, Sequence[str]], when_matched: str = "update",
                    when_matched_if: Optional[str] = None, when_not_matched: str = "insert",
                    when_not_matched_by_source: str = "keep", when_not_matched_by_source_if: Optional[str] = None,
                    ignore_unknown: bool = False, idempotency_key: Optional[str] = None) -> Dict[str, Any]:
        """An upsert with clauses, as SQL's MERGE statement, in one commit: a row
        whose key the table has updates that key's rows (``when_matched="update"``,
        where ``when_matched_if`` holds of the pair: ``target.COL``, ``source.COL``)
        or leaves them (``"ignore"``); a row whose key the table lacks is inserted
        (``when_not_matched="insert"``) or not (``"ignore"``); the table's rows
        whose key ``rows`` lack stay (``when_not_matched_by_source="keep"``) or go
        (``"delete"``, where ``when_not_matched_by_source_if`` holds of them).
        Returns ``{"inserted", "updated", "replaced", "deleted", "version"}``. The
        request is named as an append is (by ``idempotency_key`` when given): sent
        again after a lost answer, it changes nothing, so that a retry never
        deletes rows written after it landed."""
        keys = [key] if isinstance(key, str) else list(key)
        query = {"mode": "upsert", "key": ",".join(keys), "ignore_unknown": ignore_unknown,
                 "when_matched": when_matched, "when_matched_if": when_matched_if,
                 "when_not_matched": when_not_matched, "when_not_matched_by_source": when_not_matched_by_source,
                 "when_not_matched_by_source_if": when_not_matched_by_source_if}
        body, ctype = _body(rows)
        with self._named(idempotency_key) as req_name, \
                self._open("POST", self._table(name, "/rows"), query, body, ctype, name=req_name) as r:
            out = json.loads(_read(r))
        self._wrote(name, out)
        return {k: out.get(k, 0) for k in ("inserted", "updated", "replaced", "deleted", "version")}

    def scan(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None, version: Optional[int] = None,
             tag: Optional[str] = None, limit: Optional[int] = None, fresh: bool = False,
             as_of: Any = None) -> Iterator[Dict[str, Any]]:
        """Iterate over the rows as dicts, streamed as JSON lines. A scan cut short
        by the server raises rather than ending early. ``as_of`` reads the newest
        version committed at or before a time: a ``datetime`` (a naive one is
        local time), a ``timedelta`` before now, or a string as ``--as-of`` takes
        it (``"2026-12-07T10:00:00Z"``, ``"2h"``)."""
        query = self._reads_own(name, _scan_query(columns, filter, version, tag, limit, fresh, as_of))
        query["format"] = "jsonl"
        resp = self._open("GET", self._table(name, "/rows"), query, accept=NDJSON)
        return _lines(resp)

    def count(self, name: str, filter: Optional[str] = None, version: Optional[int] = None,
              tag: Optional[str] = None, fresh: bool = False, as_of: Any = None) -> int:
        """How many rows match ``filter`` (every row without one) in what a scan
        with the same arguments reads, this client's own appends included:
        answered from the table's statistics wherever they decide a fragment
        (GET …/count)."""
        query = self._reads_own(name, _scan_query(None, filter, version, tag, None, fresh, as_of))
        return self._json("GET", self._table(name, "/count"), query)["rows"]

    def scan_dataframe(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                       version: Optional[int] = None, tag: Optional[str] = None, limit: Optional[int] = None,
                       fresh: bool = False, as_of: Any = None) -> Any:
        """The rows as a pandas DataFrame (needs pandas), columns in the table's
        order (or ``columns``'). Integers are int64 (pandas' nullable ``Int64``
        in a nullable column), floats float64 (NaN and ±inf as themselves),
        booleans ``boolean``, timestamps datetime64 (UTC), binary values bytes;
        a null reads as NaN (None for bytes). Read as CSV by pandas' own
        parser — many times faster than dicts — unless a binary column is
        asked for: base64 in CSV is slower to parse than JSON lines, which are
        read then."""
        import pandas as pd

        fields = {f["name"]: f for f in self.describe(name)["schema"]["fields"]}
        wanted = list(columns) if columns else list(fields)
        binary = [n for n in wanted if fields.get(n, {}).get("type") in ("binary", "large_binary")]
        query = self._reads_own(name, _scan_query(columns, filter, version, tag, limit, fresh, as_of))
        if binary:
            query["format"] = "jsonl"
            resp = self._open("GET", self._table(name, "/rows"), query, accept=NDJSON)
            df = pd.DataFrame.from_records(list(_lines(resp)), columns=wanted)  # parsed as it arrives
            for n in binary:
                df[n] = [None if v is None else base64.b64decode(v) for v in df[n]]
        else:
            query["format"] = "csv"
            with self._open("GET", self._table(name, "/rows"), query, accept=CSV) as r:
                data = _read(r)
            df = pd.read_csv(io.BytesIO(data), dtype={n: "object" for n in wanted if fields.get(n, {}).get("type") in ("string", "large_string")})
        for n in wanted:
            t, nullable = fields.get(n, {}).get("type", ""), fields.get(n, {}).get("nullable")
            if t.startswith("timestamp"):
                df[n] = pd.to_datetime(df[n], utc=True)
            elif t == "date32":
                df[n] = pd.to_datetime(df[n], format="%Y-%m-%d")
            elif t.startswith(("int", "uint")):
                df[n] = df[n].astype(t.capitalize().replace("Uint", "UInt") if nullable else t)
            elif t.startswith("float"):
                df[n] = df[n].astype("float64")
            elif t == "bool":
                df[n] = df[n].astype("boolean")
        return df

    def scan_arrow(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                   version: Optional[int] = None, tag: Optional[str] = None, limit: Optional[int] = None,
                   fresh: bool = False, as_of: Any = None) -> Any:
        """The rows as a pyarrow Table (needs pyarrow)."""
        import pyarrow.ipc as ipc

        query = self._reads_own(name, _scan_query(columns, filter, version, tag, limit, fresh, as_of))
        with self._open("GET", self._table(name, "/rows"), query, accept=ARROW_STREAM) as r:
            return ipc.open_stream(_read(r)).read_all()

    def scan_numpy(self, name: str, columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                   version: Optional[int] = None, tag: Optional[str] = None, limit: Optional[int] = None,
                   fresh: bool = False, as_of: Any = None, fragment: Optional[int] = None,
                   offsets: Optional[Tuple[int, int]] = None) -> Dict[str, Any]:
        """The rows as a dict of column name to NumPy array (needs numpy), read
        from NumPy's own format (``format=npz``), not parsed row by row. Numbers
        and booleans come as arrays of their type, timestamps as
        ``datetime64`` (UTC), dates as ``datetime64[D]``, strings as an object
        array of ``str``, binary of ``bytes``; a column with nulls as a
        ``numpy.ma.MaskedArray`` (mask true where null). Lists and structs are
        refused (read them with ``scan``). ``fragment`` and ``offsets=(lo, hi)``
        read only those rows of one fragment of a version (see ``fragments``)."""
        from . import _npz

        query = _scan_query(columns, filter, version, tag, limit, fresh, as_of)
        if fragment is None:  # a slice reads a version's fragment, not the client's writes not merged yet
            query = self._reads_own(name, query)
        query["format"] = "npz"
        if fragment is not None:
            query["fragment"] = int(fragment)
            if offsets is not None:
                query["offsets"] = "%d:%d" % (offsets[0], offsets[1])
        elif offsets is not None:
            raise ValueError("offsets= needs fragment=")
        with self._open("GET", self._table(name, "/rows"), query, accept=_npz.NPZ) as r:
            return _npz.columns(_read(r))

    def fragments(self, name: str, version: Optional[int] = None, tag: Optional[str] = None, as_of: Any = None) -> Dict[str, Any]:
        """The fragments of a version (the latest without one), for readers that
        split it between them: ``{"version": V, "fragments": [{"id", "rows",
        "live_rows", "bytes"}]}``. Slices of them (``scan_numpy(...,
        version=V, fragment=id, offsets=(lo, hi))``) read each row once."""
        return self._json("GET", self._table(name, "/fragments"), {"version": version, "tag": tag, "as_of": _as_of(as_of)})

    def take(self, name: str, keys: Sequence[Any], column: str = "id", columns: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
        """The rows whose ``column`` holds one of ``keys``, as dicts."""
        payload = {"column": column, "keys": list(keys)}
        if columns:
            payload["columns"] = list(columns)
        body = json.dumps(payload).encode()
        resp = self._open("POST", self._table(name, "/take"), {"format": "jsonl"}, body, "application/json", accept=NDJSON)
        return list(_lines(resp))

    def update(self, name: str, filter: str, set: Optional[Mapping[str, Any]] = None,
               set_sql: Optional[str] = None) -> Dict[str, Any]:
        """Set columns of the rows matching ``filter`` to the values of the dict
        ``set`` (numbers, strings, booleans, None for null) and to what
        ``set_sql`` says (assignments as ``strata update --set`` takes them:
        ``"reward = reward * 2, step = step + 1"``, each expression over the
        row as it was before the update), in one commit.
        Returns ``{"updated", "version"}``."""
        payload: Dict[str, Any] = {}
        if set:
            payload["set"] = dict(set)
        if set_sql:
            payload["set_sql"] = set_sql
        if not payload:
            raise ValueError("update needs set or set_sql")
        return self._json("PATCH", self._table(name, "/rows"), {"filter": filter}, payload=payload)

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

    def restore(self, name: str, version: Optional[int] = None, tag: Optional[str] = None,
                as_of: Any = None) -> Dict[str, Any]:
        """Commit a new version whose rows are ``version``'s (or the tagged
        version's, or those of the newest version committed at or before
        ``as_of``, as ``scan`` takes it): ``{"version", "restored", "rows"}``."""
        payload = {k: v for k, v in (("version", version), ("tag", tag), ("as_of", _as_of(as_of))) if v is not None}
        return self._json("POST", self._table(name, "/restore"), payload=payload)

    def delete_tag(self, name: str, tag: str) -> None:
        self._json("DELETE", self._table(name, "/tags/" + urllib.parse.quote(tag, safe="")))

    # -- following a table ----------------------------------------------

    def changes(self, name: str, from_version: Optional[int] = None, consumer: Optional[str] = None, to: Optional[int] = None,
                wait: Optional[float] = None, columns: Optional[Sequence[str]] = None,
                filter: Optional[str] = None, from_as_of: Any = None,
                to_as_of: Any = None) -> Tuple[List[Dict[str, Any]], int]:
        """The rows inserted and deleted after ``from_version`` (or after the named
        ``consumer``'s position), through ``to`` (the latest by default), as
        ``(rows, through)``: dicts with ``_change`` ("insert" or "delete") and
        ``_version``, and the version read through — ask from it next time to read
        every change once. ``wait`` (seconds, at most 60) waits for a new version
        when there is none. ``filter`` keeps the changed rows it matches (a delete
        by the values it deleted). A range garbage collection removed raises
        StrataError with status 410 (``version_collected``) naming the oldest
        version left. ``from_as_of`` and ``to_as_of`` name the bounds by time (a
        datetime, a timedelta before now, or a string as ``as_of`` takes):
        ``from_as_of=timedelta(hours=2)`` reads the changes of the last two
        hours."""
        if from_version is None and consumer is None and from_as_of is None:
            raise ValueError("changes need from_version, from_as_of or consumer")
        query = {"format": "jsonl"}
        if from_as_of is not None:
            query["from_as_of"] = _as_of(from_as_of)
        if to_as_of is not None:
            query["to_as_of"] = _as_of(to_as_of)
        if from_version is not None:
            query["from"] = from_version
        if consumer is not None:
            query["consumer"] = consumer
        if to is not None:
            query["to"] = to
        rows, through, _ = self._read_changes(name, query, wait, columns, filter)
        return rows, through

    def _read_changes(self, name, query, wait, columns, filter):
        """GET …/changes with query and the reads' shared parameters: the rows,
        the version read through, and the answer's headers."""
        if wait:
            query["wait"] = "%.3fs" % wait
        if columns:
            query["columns"] = _column_list(columns)
        if filter:
            query["filter"] = filter
        resp = self._open("GET", self._table(name, "/changes"), query, accept=NDJSON)
        headers = resp.headers
        return list(_lines(resp)), int(headers.get("Strata-Version", "0")), headers

    def follow(self, name: str, consumer: Optional[str] = None, from_version: Optional[int] = None, wait: float = 30,
               columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
               group: Optional[str] = None, member: Optional[str] = None, lease: float = 60) -> Iterator[Dict[str, Any]]:
        """Yield ``(rows, through)`` as versions land, forever: each a run of
        changes and the version read through (``rows`` may be empty). With
        ``consumer`` it starts after the consumer's position (``from_version``
        when it has none) and records the new position once the caller asks for
        the next run — having done what it does with this one.

        With ``group`` and ``member`` it follows as that member of a consumer
        group: the group's members split the units of change of each new
        version between them (see ``group_changes``), each row with ``_unit``;
        a run is acknowledged when the caller asks for the next, and the member
        leaves the group (its share going to the others at once) when the
        generator is closed. A member that asks nothing for ``lease`` seconds
        loses its share to the others; a unit it had not acknowledged comes
        again to whichever member takes it (a sink keyed by ``_version`` and
        ``_unit`` takes it once)."""
        if group is not None or member is not None:
            if group is None or member is None or consumer is not None:
                raise ValueError("follow: group and member go together, without consumer")
            yield from self._follow_group(name, group, member, wait, columns, filter, lease)
            return
        position = from_version
        if consumer is not None:
            known = {c["name"]: c["version"] for c in self.consumers(name)}
            if consumer in known:
                position = known[consumer]
        if position is None:
            raise ValueError("follow needs from_version, or a consumer with a recorded position")
        while True:
            rows, through = self.changes(name, from_version=position, wait=wait, columns=columns, filter=filter)
            if through > position or rows:
                yield rows, through
                if consumer is not None and through > position:
                    self.set_consumer(name, consumer, through)
            position = max(position, through)

    def _follow_group(self, name, group, member, wait, columns, filter, lease):
        ack = None
        try:
            while True:
                rows, through, ack = self.group_changes(name, group, member, ack=ack, wait=wait, columns=columns,
                                                        filter=filter, lease=lease)
                if rows or ack:
                    yield rows, through
        finally:
            try:
                self.leave_group(name, group, member)
            except StrataError:
                pass

    def group_changes(self, name: str, group: str, member: str, ack: Optional[str] = None, wait: Optional[float] = None,
                      columns: Optional[Sequence[str]] = None, filter: Optional[str] = None,
                      lease: Optional[float] = None) -> Tuple[List[Dict[str, Any]], int, Optional[str]]:
        """One read of ``member``'s share of consumer group ``group``'s changes:
        ``(rows, through, ack)``. The rows are those of the units of change
        (each fragment a version adds, and its deletes) its partitions hold
        after their positions, with ``_change``, ``_version`` and ``_unit``;
        ``ack`` is what to send back with the next read once done with them
        (None when the answer covers nothing): the group records it then. The
        first read joins the group; ``lease`` (seconds, default 60) is how long
        the claim lasts without a read."""
        query = {"format": "jsonl", "group": group, "member": member, "ack": ack}
        if lease:
            query["lease"] = "%.3fs" % lease
        rows, through, headers = self._read_changes(name, query, wait, columns, filter)
        return rows, through, headers.get("Strata-Group-Ack") or None

    def leave_group(self, name: str, group: str, member: str) -> None:
        """``member`` leaves consumer group ``group``: its share goes to the
        others at once."""
        self._json("DELETE", self._table(name, "/groups/%s/members/%s" % (urllib.parse.quote(group, safe=""),
                                                                            urllib.parse.quote(member, safe=""))))

    def delete_group(self, name: str, group: str) -> None:
        """Delete consumer group ``group``'s positions (stop its members first):
        garbage collection no longer holds what it has not read."""
        self._json("DELETE", self._table(name, "/groups/" + urllib.parse.quote(group, safe="")))

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
        """Build a key index of an integer, string or binary column; ``take`` and upserts read it, through compactions."""
        return self._json("POST", self._table(name, "/indexes"), payload={"column": column})

    def alter(self, name: str, *, add: Optional[Mapping[str, str]] = None, rename: Optional[Mapping[str, str]] = None,
              widen: Optional[Mapping[str, str]] = None, drop: Optional[Sequence[str]] = None,
              cluster_by: Optional[Sequence[str]] = None,
              changes: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
        """Change the table's columns in one commit, by metadata alone; rows
        written before read under the new schema. ``add`` maps new column
        names to types ({"grade": "string"}; added columns are nullable),
        ``rename`` old names to new, ``widen`` names to a wider type or
        "nullable", ``drop`` is a list of names; they apply in the order
        rename, widen, drop, add. ``cluster_by`` sets the table's cluster
        key, the columns compaction sorts fragments by (``[]`` clears it).
        ``changes`` gives the request's own list instead ({"op": "add",
        "column": ..., "type": ...}). Returns the table as it is after, its
        ``cluster_by`` naming the key's columns when it has one."""
        if changes is not None and any(x is not None for x in (add, rename, widen, drop, cluster_by)):
            raise TypeError("give changes or add/rename/widen/drop/cluster_by, not both")
        if changes is None:
            changes = [{"op": "rename", "column": k, "to": v} for k, v in (rename or {}).items()]
            for k, v in (widen or {}).items():
                changes.append({"op": "widen", "column": k, "nullable": True} if v == "nullable"
                               else {"op": "widen", "column": k, "type": v})
            changes += [{"op": "drop", "column": k} for k in (drop or [])]
            changes += [{"op": "add", "column": k, "type": v} for k, v in (add or {}).items()]
            if cluster_by is not None:
                if isinstance(cluster_by, str):
                    raise TypeError("cluster_by takes a list of column names, not a string")
                changes.append({"op": "cluster_by", "columns": list(cluster_by)})
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

    def gc(self, name: str, keep_versions: Optional[int] = None, retain: Any = None, safety_age: Any = None,
           dry_run: bool = False) -> Dict[str, Any]:
        """Collect the table's garbage (POST …/gc) with the collector's safety
        rules: the newest ``keep_versions`` versions, those younger than
        ``retain``, tagged versions and what named consumers have not read are
        kept; unreferenced objects younger than ``safety_age`` too (durations as
        ``timedelta`` or strings such as ``"168h"``; at least 5 minutes).
        Returns ``{"boundary", "versions_kept", "versions_deleted",
        "objects_deleted", "bytes_freed", "dry_run", "plan"?}``."""
        payload: Dict[str, Any] = {"dry_run": dry_run}
        if keep_versions is not None:
            payload["keep_versions"] = keep_versions
        for key, d in (("retain", retain), ("safety_age", safety_age)):
            if d is not None:
                payload[key] = _duration(d)
        return self._json("POST", self._table(name, "/gc"), payload=payload)

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
            # A poll that finds a merge running counts neither way; one
            # that finds none running and no fewer generations waiting is
            # a stall, so that merges that keep failing are found out
            # however long each takes.
            if n < last:
                stalls = 0
            elif not merging:
                stalls += 1
                if stalls >= max_stalls:
                    raise StrataError(0, "checkpoint_stalled",
                                      f"checkpoint of {name} made no progress in {stalls} polls: {n} generations at or below the target still await merging")
            last = n


class _Connections:
    """Kept-alive connections to one server (HTTP/1.1): a request takes an idle
    one, or opens one, and its answer gives it back once read to its end (an
    answer left unread closes it). At most ``keep`` idle ones are kept, and
    one idle for ``idle`` seconds (the server closes them after two minutes)
    is closed rather than used. A request that finds a kept connection closed
    by the server before it answers is sent once more on a new one: the
    server closes only connections with no request on them, so it never
    read it."""

    def __init__(self, base: str, timeout: float, keep: int = 8, idle: float = 60.0,
                 tls: Optional[ssl.SSLContext] = None) -> None:
        u = urllib.parse.urlsplit(base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base!r}: want http://host:port or https://host:port")
        self.https, self.host, self.port = u.scheme == "https", u.hostname, u.port
        self.prefix = u.path.rstrip("/")
        self.timeout, self.keep, self.idle, self.tls = timeout, keep, idle, tls
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < self.idle:
                    return conn, True
                conn.close()
        return self._new(), False

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def send(self, method: str, target: str, body: Optional[bytes], headers: Mapping[str, str]) -> "_Answer":
        conn, reused = self._take()
        try:
            conn.request(method, target, body=body, headers=dict(headers))
            resp = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
            conn.close()
            if not reused:
                raise
            conn = self._new()
            try:
                conn.request(method, target, body=body, headers=dict(headers))
                resp = conn.getresponse()
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise
        return _Answer(resp, conn, self)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()


class _Answer:
    """An answer being read: file-like (``read``, lines), a context manager;
    closed once read to its end, its connection goes back to be kept."""

    def __init__(self, resp: http.client.HTTPResponse, conn: http.client.HTTPConnection, conns: _Connections) -> None:
        self._resp, self._conn, self._conns = resp, conn, conns
        self.status, self.headers = resp.status, resp.headers

    def read(self, n: int = -1) -> bytes:
        return self._resp.read() if n is None or n < 0 else self._resp.read(n)

    def readline(self) -> bytes:
        return self._resp.readline()

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line = self._resp.readline()
            if not line:
                self._resp.read()  # the end of a chunked body: its last chunk and trailer
                return
            yield line

    def close(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        done = self._resp.isclosed()  # read to its end
        self._resp.close()
        if done and not self._resp.will_close:
            self._conns.give_back(conn)
        else:
            conn.close()

    def __enter__(self) -> "_Answer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False


def _error(status, data):
    """The StrataError of an error answer's body."""
    try:
        err = json.loads(data)["error"]
        return StrataError(status, err.get("code", ""), err.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return StrataError(status, "", data.decode("utf-8", "replace"))


def _scan_query(columns, filter, version, tag, limit, fresh, as_of=None):
    return {"columns": _column_list(columns) if columns else None, "filter": filter, "version": version,
            "tag": tag, "limit": limit, "fresh": fresh, "as_of": _as_of(as_of)}


def _duration(d):
    """A duration as the server reads one: a timedelta in whole seconds, a
    string as it is."""
    if isinstance(d, datetime.timedelta):
        return "%ds" % int(d.total_seconds())
    if isinstance(d, str):
        return d
    raise TypeError(f"want a timedelta or a string such as '168h', got {type(d).__name__}")


def _as_of(at):
    """A point in time as as_of= takes it: a datetime (naive: local time) or a
    timedelta before now as RFC 3339 in UTC, a string as it is."""
    if at is None or isinstance(at, str):
        return at
    if isinstance(at, datetime.timedelta):
        at = datetime.datetime.now(datetime.timezone.utc) - at
    if isinstance(at, datetime.datetime):
        return at.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
    raise TypeError(f"as_of: want a datetime, a timedelta or a string, got {type(at).__name__}")


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


def _body(rows):
    """The body of rows to write, and its content type."""
    if _is_arrow(rows):
        return _arrow_stream(rows), ARROW_STREAM
    if _is_dataframe(rows):
        rows = rows.to_dict(orient="records")
    return "".join(json.dumps(r, separators=(",", ":"), default=_json_value) + "\n" for r in rows).encode(), NDJSON


def _is_dataframe(rows):
    return type(rows).__module__.startswith("pandas") and hasattr(rows, "to_dict")


def _json_value(v):
    """A value json does not write itself: bytes in base64 (as binary columns
    take them), a numpy scalar as its Python value, a timestamp as ISO 8601,
    a missing value (pandas NA, NaT) as null."""
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if hasattr(v, "isoformat"):
        try:
            return None if v != v else v.isoformat()  # NaT != NaT
        except TypeError:
            return v.isoformat()
    if hasattr(v, "item"):
        return v.item()
    if type(v).__name__ in ("NAType", "NaTType"):
        return None
    raise TypeError(f"{type(v).__name__} {v!r} cannot be written as JSON")


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


from .connection import Connection, Table, connect  # noqa: E402  (uses Client)
