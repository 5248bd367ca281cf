"""Tests of the Python client against a real ``strata serve`` (STRATA_BIN, or
built with ``go build`` from the repository)."""

import datetime
import importlib.util
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from strata_client import Client, StrataConnectionError, StrataError  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "worker", "type": "string"},
    {"name": "reward", "type": "float64", "nullable": True},
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strata_binary(tmp):
    """The strata binary to run: STRATA_BIN, or one built into tmp."""
    binary = os.environ.get("STRATA_BIN")
    if not binary:
        binary = os.path.join(tmp, "strata")
        # strata runs the verb's program from beside it: strata-full serves.
        subprocess.run(["go", "build", "-o", tmp + os.sep, "./cmd/strata", "./cmd/strata-full"], cwd=REPO, check=True)
    return binary


def wait_up(url):
    """Waits until the strata serve at url answers /healthz (10 s at most)."""
    for _ in range(400):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).close()
            return
        except OSError:
            time.sleep(0.025)
    raise RuntimeError("strata serve never answered at " + url)


class FolderServer:
    """A strata serve on a folder of its own, for a test class: ``start`` in
    setUpClass, ``stop`` in tearDownClass; ``url`` and ``client``."""

    def __init__(self, prefix):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        port = free_port()
        self.log = open(os.path.join(self.tmp, "serve.log"), "wb")
        self.proc = subprocess.Popen(
            [strata_binary(self.tmp), "serve", "--bucket", "file://" + os.path.join(self.tmp, "tables"),
             "--listen", f"127.0.0.1:{port}", "--flush-interval", "1h", "--merge-interval", "1h"],
            stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = f"http://127.0.0.1:{port}"
        wait_up(self.url)
        self.client = Client(self.url)

    def stop(self):
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="strata-py-")
        binary = strata_binary(cls.tmp)
        port = free_port()
        # The server's log goes to a file: a pipe nobody reads fills (64 KiB)
        # and the server then blocks at its next log line.
        cls.log = open(os.path.join(cls.tmp, "serve.log"), "wb")
        cls.proc = subprocess.Popen(
            [binary, "serve", "--bucket", "file://" + os.path.join(cls.tmp, "tables"), "--listen", f"127.0.0.1:{port}",
             "--instance", "py", "--flush-interval", "1h", "--merge-interval", "1h"],
            stdout=subprocess.DEVNULL, stderr=cls.log)
        cls.url = f"http://127.0.0.1:{port}"
        wait_up(cls.url)
        cls.c = Client(cls.url)

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def rows(self, start, n, worker="w1"):
        return [{"id": i, "worker": worker, "reward": (None if i % 3 == 0 else i / 10)} for i in range(start, start + n)]

    def test_round_trip(self):
        c = self.c
        info = c.create_table("events", SCHEMA)
        self.assertEqual(info["name"], "events")
        with self.assertRaises(StrataError) as e:
            c.create_table("events", SCHEMA)
        self.assertEqual(e.exception.status, 409)
        self.assertIn("events", [t["name"] for t in c.tables()])

        self.assertEqual(c.append("events", self.rows(0, 30)), 30)
        # Read-your-writes before any merge, then a checkpoint.
        self.assertEqual(len(list(c.scan("events", fresh=True))), 30)
        c.checkpoint_lsm("events")
        got = list(c.scan("events"))
        self.assertEqual(sorted(r["id"] for r in got), list(range(30)))
        self.assertIsNone(next(r for r in got if r["id"] == 3)["reward"])  # a null stays null
        self.assertEqual([r["id"] for r in c.scan("events", filter="id >= 25", columns=["id"])], [25, 26, 27, 28, 29])

        self.assertEqual(c.create_index("events", "id")["column"], "id")
        self.assertEqual([ix["column"] for ix in c.indexes("events")], ["id"])
        taken = c.take("events", [4, 5, 999], columns=["id", "reward"])
        self.assertEqual(sorted(r["id"] for r in taken), [4, 5])
        # By a string key: every row of worker w1 (the 30 rows), none of w9.
        taken = c.take("events", ["w1", "w9"], column="worker", columns=["id"])
        self.assertEqual(sorted(r["id"] for r in taken), list(range(30)))
        with self.assertRaises(StrataError) as e:
            c.take("events", ["four"], columns=["id"])
        self.assertEqual(e.exception.status, 400)

        # All or nothing: a bad row fails the request and stores nothing.
        with self.assertRaises(StrataError) as e:
            c.append("events", self.rows(100, 2) + [{"id": "not a number", "worker": "w1"}])
        self.assertEqual(e.exception.status, 400)
        c.checkpoint_lsm("events")
        self.assertEqual(len(list(c.scan("events"))), 30)

        v = c.versions("events", limit=5, detail=True)
        self.assertTrue(v and "version" in v[0] and "time" in v[0])
        tag = c.create_tag("events", "first")
        self.assertEqual(tag["name"], "first")
        self.assertFalse(tag["created"].startswith("0001"))
        self.assertEqual(len(list(c.scan("events", tag="first"))), 30)
        c.delete_tag("events", "first")
        self.assertEqual(c.tags("events"), [])

        res = c.delete("events", "id < 10")
        self.assertEqual(res["deleted"], 10)
        self.assertEqual(len(list(c.scan("events"))), 20)

    def test_own_writes_are_read_at_once(self):
        # The server merges once an hour here: a client reads its own appends
        # from the WAL at once (written=), another client only once merged.
        c = self.c
        c.create_table("own", SCHEMA)
        self.assertEqual(c.append("own", self.rows(0, 5)), 5)
        self.assertEqual(sorted(r["id"] for r in c.scan("own")), [0, 1, 2, 3, 4])
        self.assertEqual([r["id"] for r in c.scan("own", filter="id >= 3", columns=["id"])], [3, 4])
        self.assertEqual(c.describe("own")["rows"], 5)
        self.assertEqual(sorted(c.scan_dataframe("own")["id"]), [0, 1, 2, 3, 4])
        other = Client(self.url, own_writes=False)
        try:
            self.assertEqual(list(other.scan("own")), [])
            self.assertEqual(other.describe("own")["rows"], 0)
            c.checkpoint_lsm("own")
            self.assertEqual(sorted(r["id"] for r in other.scan("own")), [0, 1, 2, 3, 4])
        finally:
            other.close()
        # Merged, the rows are read once, not once from the table and once
        # from the WAL.
        self.assertEqual(sorted(r["id"] for r in c.scan("own")), [0, 1, 2, 3, 4])
        # A table dropped and created again under the name starts afresh.
        c.drop("own")
        c.create_table("own", SCHEMA)
        self.assertEqual(list(c.scan("own")), [])

    def test_follow_as_a_named_consumer(self):
        c = self.c
        c.create_table("followed", SCHEMA)
        c.append("followed", self.rows(0, 4))
        c.checkpoint_lsm("followed")
        rows, through = c.changes("followed", from_version=0, columns=["id"])
        self.assertEqual(sorted(r["id"] for r in rows), [0, 1, 2, 3])
        self.assertEqual({r["_change"] for r in rows}, {"insert"})
        rows, _ = c.changes("followed", from_version=0, columns=["id"], filter="id >= 2")
        self.assertEqual(sorted(r["id"] for r in rows), [2, 3])
        # Bounds by time: since a day ago (before the table was made) through
        # now, every change; through a day ago, the table did not exist.
        day = datetime.timedelta(days=1)
        rows, upto = c.changes("followed", from_as_of=day, to_as_of=datetime.timedelta(0), columns=["id"])
        self.assertEqual((sorted(r["id"] for r in rows), upto), ([0, 1, 2, 3], through))
        with self.assertRaises(StrataError) as e:
            c.changes("followed", from_version=0, to_as_of=day)
        self.assertEqual(e.exception.status, 404)
        self.assertIn("oldest retained", str(e.exception))
        runs = c.follow("followed", consumer="trainer", from_version=0, wait=0.05, columns=["id"])
        rows, first = next(runs)
        self.assertEqual(sorted(r["id"] for r in rows), [0, 1, 2, 3])
        self.assertEqual(first, through)
        c.delete("followed", "id = 1")
        rows, second = next(runs)  # asking for it records the first position
        self.assertEqual([(r["_change"], r["id"]) for r in rows], [("delete", 1)])
        self.assertEqual(c.consumers("followed")[0]["version"], first)
        # Nothing new after the consumer's position: a long poll answers empty.
        c.set_consumer("followed", "trainer", second)
        self.assertEqual(c.changes("followed", consumer="trainer", wait=0.05), ([], second))
        c.delete_consumer("followed", "trainer")
        self.assertEqual(c.consumers("followed"), [])
        # Restore the rows from before the delete.
        restored = c.restore("followed", version=first)
        self.assertEqual((restored["restored"], restored["rows"]), (first, 4))
        self.assertEqual(sorted(r["id"] for r in c.scan("followed")), [0, 1, 2, 3])

    def test_compaction_and_lsm(self):
        c = self.c
        c.create_table("runs", SCHEMA)
        for i in range(4):
            c.append("runs", self.rows(i * 10, 10))
            c.checkpoint_lsm("runs")
        stats = c.lsm_stats("runs")
        self.assertTrue(stats["shards"])
        self.assertNotIn("pending_rows", stats["shards"][0])  # absent, not zero
        self.assertIn("pending_rows", c.lsm_stats("runs", include_generation_rows=True)["shards"][0])

        plan = c.compact("runs", dry_run=True)
        self.assertGreater(plan["fragments_before"], plan["fragments_after"])
        with self.assertRaises(StrataError) as e:
            c.compact("runs", min_fragments=100)
        self.assertEqual((e.exception.status, e.exception.code), (409, "not_due"))
        c.compact("runs")
        deadline = time.time() + 30
        while True:
            st = c.compact_stats("runs")
            if st["total_compactions"] == 1 and not st["running"]:
                break
            self.assertLess(time.time(), deadline, st)
            time.sleep(0.05)
        self.assertEqual(st["fragments"], 1)
        self.assertIsNone(st["last_error"])
        self.assertEqual(sorted(r["id"] for r in c.scan("runs", columns=["id"])), list(range(40)))

    def test_columns_of_any_name(self):
        # A comma, a backtick or a space at the ends of a name: the client
        # quotes each as the server reads columns=.
        c = self.c
        names = ["id", "a,b", "`tick", " lead", "x y"]
        c.create_table("odd", [{"name": n, "type": "int64"} for n in names])
        c.append("odd", [{n: i for i, n in enumerate(names)}])
        c.checkpoint_lsm("odd")
        for cols in (["a,b"], ["`tick", "id"], [" lead", "a,b", "x y"]):
            self.assertEqual(list(c.scan("odd", columns=cols)), [{n: names.index(n) for n in cols}])
            self.assertEqual(list(list(c.scan("odd", columns=cols))[0]), cols)

    def test_upsert_by_key(self):
        c = self.c
        c.create_table("upserts", SCHEMA)
        c.append("upserts", self.rows(1, 3))  # ids 1..3, in the server's shard
        out = c.upsert("upserts", [{"id": 2, "worker": "w2", "reward": 2.5}, {"id": 9, "worker": "w2", "reward": 9.5}], key="id")
        self.assertEqual((out["rows"], out["replaced"]), (2, 1))
        got = {r["id"]: (r["worker"], r["reward"]) for r in c.scan("upserts")}
        self.assertEqual(got, {1: ("w1", 0.1), 2: ("w2", 2.5), 3: ("w1", None), 9: ("w2", 9.5)})
        # By two columns: (2, "w2") is replaced, (2, "w3") is new.
        out = c.upsert("upserts", [{"id": 2, "worker": "w2", "reward": 0.0}, {"id": 2, "worker": "w3", "reward": 1.0}], key=["id", "worker"])
        self.assertEqual((out["rows"], out["replaced"]), (2, 1))
        self.assertEqual(len(list(c.scan("upserts"))), 5)
        with self.assertRaises(StrataError) as e:
            c.upsert("upserts", [{"id": 7, "worker": "a"}, {"id": 7, "worker": "b"}], key="id")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("twice", str(e.exception))
        out = c.update("upserts", "id = 2", {"reward": None, "worker": "w9"})
        self.assertEqual(out["updated"], 2)
        self.assertEqual(sorted((r["worker"], r["reward"]) for r in c.scan("upserts", filter="id = 2")), [("w9", None), ("w9", None)])
        with self.assertRaises(StrataError) as e:
            c.update("upserts", "id = 2", {"id": None})
        self.assertEqual(e.exception.status, 400)
        # NaN and the infinities, which JSON has no number for, are set too.
        c.update("upserts", "id = 2", {"reward": float("nan")})
        self.assertTrue(all(math.isnan(r["reward"]) for r in c.scan("upserts", filter="id = 2")))
        c.update("upserts", "id = 2", {"reward": float("-inf")})
        self.assertEqual({r["reward"] for r in c.scan("upserts", filter="id = 2")}, {float("-inf")})

    def test_nan_infinity_and_floats_round_trip_in_schema_order(self):
        c = self.c
        c.create_table("rewards", SCHEMA)
        rows = [
            {"id": 1, "worker": "w1", "reward": float("nan")},
            {"id": 2, "worker": "w1", "reward": float("inf")},
            {"id": 3, "worker": "w1", "reward": float("-inf")},
            {"id": 4, "worker": "w1", "reward": 0.0},
            {"id": 5, "worker": "w1", "reward": 2.0},
        ]
        c.append("rewards", rows)
        for fresh in (True, False):
            if not fresh:
                c.checkpoint_lsm("rewards")
            got = sorted(c.scan("rewards", fresh=fresh), key=lambda r: r["id"])
            self.assertEqual([list(r) for r in got], [["id", "worker", "reward"]] * 5)  # the schema's order
            self.assertTrue(math.isnan(got[0]["reward"]))
            self.assertEqual([r["reward"] for r in got[1:]], [float("inf"), float("-inf"), 0.0, 2.0])
            self.assertEqual([type(r["reward"]) for r in got[1:]], [float] * 4)
        self.assertEqual([r["id"] for r in c.scan("rewards", filter="reward > 100")], [2])

    def test_no_server_is_the_clients_own_error(self):
        with Client(f"http://127.0.0.1:{free_port()}", timeout=2, retry_for=0.2) as c:
            with self.assertRaises(StrataConnectionError) as e:
                c.tables()
            self.assertIsInstance(e.exception, StrataError)
            self.assertEqual(e.exception.status, 0)
            with self.assertRaises(StrataConnectionError):
                c.append("events", [{"id": 1, "worker": "w", "reward": 0.5}])  # named: retried, then given up

    def test_upsert_through_the_shard(self):
        c = self.c
        c.create_table("shardups", SCHEMA)
        c.append("shardups", self.rows(1, 3))  # ids 1..3, in the server's shard
        out = c.upsert("shardups", [{"id": 2, "worker": "w2", "reward": 2.5}], key="id", through_shard=True)
        self.assertEqual((out["rows"], out["version"]), (1, 0))
        c.upsert("shardups", [{"id": 2, "worker": "w3", "reward": 3.5}, {"id": 9, "worker": "w3", "reward": 9.5}], key="id", through_shard=True)
        want = {1: ("w1", 0.1), 2: ("w3", 3.5), 3: ("w1", None), 9: ("w3", 9.5)}
        fresh = [(r["id"], (r["worker"], r["reward"])) for r in c.scan("shardups", fresh=True)]
        self.assertEqual(sorted(fresh), sorted(want.items()))  # one row per key before the merge
        c.checkpoint_lsm("shardups")
        merged = [(r["id"], (r["worker"], r["reward"])) for r in c.scan("shardups")]
        self.assertEqual(sorted(merged), sorted(want.items()))

    def test_alter(self):
        c = self.c
        c.create_table("evolve", SCHEMA)
        rows = self.rows(1, 3)
        c.append("evolve", rows)  # in the server's shard, not merged: replayed under the new schema
        info = c.alter("evolve", add={"grade": "string"}, rename={"reward": "score"})
        self.assertEqual([f["name"] for f in info["schema"]["fields"]], ["id", "worker", "score", "grade"])
        c.append("evolve", [{"id": 9, "worker": "w9", "score": 9.5, "grade": "A"}])
        c.checkpoint_lsm("evolve")
        got = {r["id"]: (r["score"], r["grade"]) for r in c.scan("evolve")}
        self.assertEqual(got, {**{r["id"]: (r.get("reward"), None) for r in rows}, 9: (9.5, "A")})
        with self.assertRaises(StrataError) as e:
            c.alter("evolve", widen={"worker": "int64"})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("worker", str(e.exception))

    def test_cluster_by(self):
        c = self.c
        c.create_table("clustered", SCHEMA)
        rows = self.rows(1, 40)
        c.append("clustered", rows)
        c.checkpoint_lsm("clustered")
        info = c.alter("clustered", cluster_by=["worker", "reward"])
        self.assertEqual(info["cluster_by"], ["worker", "reward"])
        with self.assertRaises(StrataError) as e:
            c.alter("clustered", cluster_by=["nope"])
        self.assertEqual(e.exception.status, 400)
        self.assertIn("nope", str(e.exception))
        with self.assertRaises(TypeError):
            c.alter("clustered", cluster_by="worker")
        with self.assertRaises(TypeError):
            c.alter("clustered", changes=[{"op": "add", "column": "g", "type": "string"}], cluster_by=["worker"])
        with self.assertRaises(StrataError) as e:
            c.alter("clustered", changes=[{"op": "add", "column": "g", "type": "string", "columns": []}])
        self.assertEqual(e.exception.status, 400)
        info = c.alter("clustered", cluster_by=[])
        self.assertNotIn("cluster_by", info)
        self.assertEqual(sorted(r["id"] for r in c.scan("clustered")), sorted(r["id"] for r in rows))

    def test_errors(self):
        with self.assertRaises(StrataError) as e:
            list(self.c.scan("missing"))
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))

    def test_requests_share_kept_alive_connections(self):
        opened = []
        with Client(self.url) as c:
            new = c._conns._new
            c._conns._new = lambda: opened.append(1) or new()
            c.create_table("kept", SCHEMA)
            for i in range(10):
                c.append("kept", self.rows(i * 10, 10))
                self.assertEqual(len(list(c.scan("kept", fresh=True, columns=["id"]))), (i + 1) * 10)
            self.assertEqual(c.describe("kept")["name"], "kept")
        self.assertEqual(len(opened), 1, "22 requests one after the other opened %d connections" % len(opened))

    def test_dataframes_round_trip_nan_and_infinity_in_schema_order(self):
        if importlib.util.find_spec("pandas") is None:
            if os.environ.get("CI", "") not in ("", "0", "false"):
                self.fail("pandas is missing: the test command installs it (scripts/install-test-deps.sh)")
            self.skipTest("pandas is not installed")
        import pandas as pd

        c = self.c
        c.create_table("frames", SCHEMA)
        df = pd.DataFrame({"reward": [float("nan"), float("inf"), float("-inf"), 0.0, 2.5],
                           "id": [1, 2, 3, 4, 5], "worker": ["a", "b", "c", "d", "e"]})
        self.assertEqual(c.append("frames", df), 5)
        for fresh in (True, False):
            if not fresh:
                c.checkpoint_lsm("frames")
            got = c.scan_dataframe("frames", fresh=fresh).sort_values("id").reset_index(drop=True)
            self.assertEqual(list(got.columns), ["id", "worker", "reward"])  # the schema's order
            self.assertEqual([str(t) for t in got.dtypes], ["int64", "object", "float64"])
            pd.testing.assert_frame_equal(got, df[["id", "worker", "reward"]])
        stored = {r["id"]: r["reward"] for r in c.scan("frames")}
        self.assertTrue(math.isnan(stored[1]))  # NaN stored as NaN, not null
        some = c.scan_dataframe("frames", columns=["reward", "id"], filter="reward > 1")
        self.assertEqual(list(some.columns), ["reward", "id"])
        self.assertEqual(sorted(some["id"]), [2, 5])
        empty = c.scan_dataframe("frames", filter="id > 100")
        self.assertEqual((len(empty), list(empty.columns)), (0, ["id", "worker", "reward"]))
        # Binary values, nullable integers, timestamps (read as JSON lines).
        c.create_table("blobs", [{"name": "id", "type": "int64"}, {"name": "n", "type": "int32", "nullable": True},
                                 {"name": "at", "type": "timestamp_us"}, {"name": "blob", "type": "binary", "nullable": True}])
        blobs = pd.DataFrame({"id": [1, 2], "n": pd.array([7, None], dtype="Int32"),
                              "at": pd.to_datetime(["2026-01-02 03:04:05.000006", "2026-01-02 03:04:06"], utc=True),
                              "blob": [b"\x00\xffraw", None]})
        self.assertEqual(c.append("blobs", blobs), 2)
        got = c.scan_dataframe("blobs", fresh=True).sort_values("id").reset_index(drop=True)
        self.assertEqual(list(got["blob"]), [b"\x00\xffraw", None])
        self.assertEqual(list(got["n"].astype(object)), [7, pd.NA])
        self.assertEqual(list(got["at"]), list(blobs["at"]))

    @unittest.skipUnless(__import__("importlib").util.find_spec("pyarrow"), "pyarrow is not installed")
    def test_arrow(self):
        import pyarrow as pa

        c = self.c
        c.create_table("arrow", SCHEMA)
        t = pa.table({"id": pa.array([1, 2], pa.int64()), "worker": ["a", "b"], "reward": [0.5, None]})
        self.assertEqual(c.append("arrow", t), 2)
        c.checkpoint_lsm("arrow")
        self.assertEqual(c.scan_arrow("arrow").num_rows, 2)


if __name__ == "__main__":
    unittest.main()
