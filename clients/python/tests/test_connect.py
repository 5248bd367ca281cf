"""A LanceDB quick start, ported line by line: connect() to a folder with no
server started by hand, create_table from dicts (and from a DataFrame with
pandas installed), add, count_rows, update (values and values_sql),
merge_insert, optimize, checkout of an old version, add(mode="overwrite"),
to_batches. The connection's server is the
strata binary of STRATA_BIN (or one built from the repository)."""

import datetime
import importlib.util
import os
import gc
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import strata_client  # noqa: E402
from strata_client import StrataConnectionError, StrataError  # noqa: E402
from test_client import strata_binary  # noqa: E402

def rss_mib():
    """The process's resident memory now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


HAS_PANDAS = importlib.util.find_spec("pandas") is not None


class ConnectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="strata-connect-")
        cls.saved = os.environ.get("STRATA_BIN")
        os.environ["STRATA_BIN"] = strata_binary(cls.tmp)
        cls.lake = os.path.join(cls.tmp, "lake")
        cls.db = strata_client.connect(cls.lake)

    @classmethod
    def tearDownClass(cls):
        cls.db.close()
        if cls.saved is None:
            os.environ.pop("STRATA_BIN", None)
        else:
            os.environ["STRATA_BIN"] = cls.saved
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_quick_start(self):
        db = self.db
        data = [
            {"vector": 1.5, "item": "foo", "price": 10.0},
            {"vector": 2.5, "item": "bar", "price": 20.0},
        ]
        tbl = db.create_table("my_table", data=data)
        tbl.checkpoint()  # the rows in a version of the table, to check out below
        self.assertIn("my_table", db.table_names())
        self.assertEqual([(f["name"], f["type"]) for f in tbl.schema],
                         [("vector", "float64"), ("item", "string"), ("price", "float64")])
        first = tbl.version
        self.assertEqual(tbl.count_rows(), 2)  # read at once, merged or not
        tbl.add([{"vector": 3.5, "item": "baz", "price": 30.0}])
        self.assertEqual(tbl.count_rows(), 3)
        self.assertEqual(tbl.count_rows("price > 15"), 2)
        self.assertEqual(sorted(r["item"] for r in tbl.to_list(filter="price < 25")), ["bar", "foo"])

        self.assertEqual(tbl.update(where="item = 'foo'", values={"price": 11.0}), 1)
        self.assertEqual(tbl.to_list(columns=["price"], filter="item = 'foo'"), [{"price": 11.0}])
        self.assertEqual(tbl.update(values={"vector": 0.5}), 3, "no where: every row")
        self.assertEqual(tbl.count_rows("vector = 0.5"), 3)
        self.assertEqual(tbl.update(where="price > 15", values_sql={"price": "price * 2 + 1", "vector": "price"}), 2)
        self.assertEqual(sorted((r["item"], r["price"], r["vector"]) for r in tbl.to_list()),
                         [("bar", 41.0, 20.0), ("baz", 61.0, 30.0), ("foo", 11.0, 0.5)],
                         "every expression reads the row as it was")
        with self.assertRaises(StrataError) as e:
            tbl.update(values_sql={"price": "item * 2"})
        self.assertEqual(e.exception.status, 400)
        self.assertIn("arithmetic on numbers only", str(e.exception))

        res = (tbl.merge_insert("item").when_matched_update_all().when_not_matched_insert_all()
               .execute([{"vector": 9.0, "item": "bar", "price": 21.0}, {"vector": 4.5, "item": "qux", "price": 40.0}]))
        self.assertEqual(res["replaced"], 1)
        self.assertEqual(tbl.count_rows(), 4)
        self.assertEqual(tbl.count_rows("item = 'bar'"), 1, "one row per key")
        with self.assertRaises(ValueError):
            tbl.merge_insert("item").execute([{"item": "x"}])  # no clause
        res = (tbl.merge_insert("item").when_not_matched_insert_all()
               .execute([{"vector": 1.0, "item": "bar", "price": 99.0}, {"vector": 1.0, "item": "x", "price": 5.0}]))
        self.assertEqual((res["inserted"], res["updated"]), (1, 0), "insert only: bar stays as it was")
        self.assertEqual(tbl.to_list(columns=["price"], filter="item = 'bar'"), [{"price": 21.0}])
        res = (tbl.merge_insert("item").when_matched_update_all(where="target.price < source.price")
               .execute([{"vector": 1.0, "item": "x", "price": 4.0}, {"vector": 1.0, "item": "bar", "price": 30.0},
                         {"vector": 1.0, "item": "new", "price": 1.0}]))
        self.assertEqual((res["inserted"], res["updated"]), (0, 1), "update only, where the new price is higher")
        self.assertEqual(sorted((r["item"], r["price"]) for r in tbl.to_list(columns=["item", "price"], filter="item IN ('x', 'bar', 'new')")),
                         [("bar", 30.0), ("x", 5.0)])
        res = (tbl.merge_insert("item").when_not_matched_by_source_delete("item = 'x'")
               .execute([{"vector": 1.0, "item": "foo", "price": 11.0}]))
        self.assertEqual(res["deleted"], 1, "delete the rows the source lacks, where the condition holds")
        self.assertEqual(tbl.count_rows(), 4)

        self.assertEqual(tbl.delete("item = 'qux'"), 1)
        self.assertEqual(tbl.count_rows(), 3)

        done = tbl.optimize()
        self.assertLessEqual(done["fragments_after"], done["fragments_before"])
        self.assertEqual(done["fragments_after"], 1)
        self.assertEqual(tbl.count_rows(), 3)

        cleaned = tbl.cleanup_old_versions()
        self.assertEqual((cleaned["old_versions"], cleaned["bytes_removed"]), (0, 0), "nothing two weeks old")
        self.assertEqual(tbl.count_rows(), 3)
        with self.assertRaises(StrataError) as e:
            tbl.cleanup_old_versions(older_than=datetime.timedelta(seconds=1))
        self.assertEqual(e.exception.status, 400)
        self.assertIn("floor", str(e.exception))

        tbl.tags.create("after-delete")
        self.assertEqual(tbl.tags.list()["after-delete"], tbl.version)
        self.assertEqual(tbl.checkout(tag="after-delete").count_rows(), 3)
        versions = [v["version"] for v in tbl.list_versions()]
        self.assertIn(first, versions)
        old = tbl.checkout(version=first)
        self.assertEqual(old.count_rows(), 2)
        self.assertEqual(sorted(r["item"] for r in old.to_list()), ["bar", "foo"])
        with self.assertRaises(ValueError):
            old.add([{"item": "nope"}])
        tbl.restore(version=first)
        self.assertEqual(tbl.count_rows(), 2)
        when = next(v["time"] for v in tbl.list_versions() if v["version"] == first)
        self.assertEqual(tbl.checkout(as_of=when).version, first, "as of a version's own time: that version")
        self.assertEqual(tbl.checkout(as_of=datetime.timedelta(0)).version, tbl.version)
        with self.assertRaises(StrataError) as e:
            tbl.checkout(as_of="2000-01-01T00:00:00Z")
        self.assertEqual(e.exception.status, 404)
        self.assertIn("oldest retained", str(e.exception))

        before = tbl.version
        self.assertEqual(tbl.add([{"vector": 0.1, "item": "new", "price": 1.0}], mode="overwrite"), 1)
        self.assertEqual([r["item"] for r in tbl.to_list()], ["new"], "an overwrite leaves its rows alone")
        self.assertEqual(tbl.checkout(version=before).count_rows(), 2, "the history stays")
        again = db.create_table("my_table", data=[{"vector": 0.2, "item": "x", "price": 2.0},
                                                  {"vector": 0.3, "item": "y", "price": 3.0}], mode="overwrite")
        self.assertEqual(sorted(r["item"] for r in again.to_list()), ["x", "y"])
        with self.assertRaises(ValueError):
            db.create_table("my_table", data=[{"other": 1}], mode="overwrite")
        self.assertEqual(tbl.add([], mode="overwrite"), 0)
        self.assertEqual(tbl.count_rows(), 0)

        # Versions written three weeks ago, as the store sees them, go; the
        # latest and the tagged one stay.
        latest = tbl.version
        then = time.time() - 21 * 86400
        versions_dir = os.path.join(self.lake, "my_table", "_versions")
        for f in os.listdir(versions_dir):
            os.utime(os.path.join(versions_dir, f), (then, then))
        cleaned = tbl.cleanup_old_versions()
        self.assertGreater(cleaned["old_versions"], 0)
        self.assertEqual(tbl.version, latest)
        self.assertEqual(tbl.count_rows(), 0)
        self.assertEqual(tbl.checkout(tag="after-delete").count_rows(), 3)
        with self.assertRaises(StrataError) as e:
            tbl.checkout(version=first).count_rows()
        self.assertEqual(e.exception.status, 404)

        db.drop_table("my_table")
        self.assertNotIn("my_table", db.table_names())
        with self.assertRaises(StrataError) as e:
            db.open_table("my_table")
        self.assertEqual(e.exception.status, 404)

    @unittest.skipUnless(HAS_PANDAS, "pandas is not installed")
    def test_create_table_from_a_dataframe(self):
        import pandas as pd

        df = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", None], "score": [0.5, 1.5, 2.5]})
        tbl = self.db.create_table("frame", data=df)
        self.assertEqual([(f["name"], f["type"]) for f in tbl.schema], [("id", "int64"), ("name", "string"), ("score", "float64")])
        back = tbl.to_pandas().sort_values("id").reset_index(drop=True)
        self.assertEqual(back["id"].tolist(), [1, 2, 3])
        self.assertEqual(back["score"].tolist(), [0.5, 1.5, 2.5])
        self.db.drop_table("frame")

    def test_create_table_twice(self):
        self.db.create_table("twice", schema={"id": "int64"})
        with self.assertRaises(StrataError) as e:
            self.db.create_table("twice", schema={"id": "int64"})
        self.assertEqual(e.exception.status, 409)
        self.db.create_table("twice", data=[{"id": 1}], exist_ok=True)
        again = self.db.create_table("twice", data=[{"id": 1}], exist_ok=True)
        self.assertEqual(again.count_rows(), 0, "exist_ok opens the table as it is")
        with self.assertRaises(TypeError):
            self.db.create_table("mixed", data=[{"x": 1}, {"x": "one"}])
        self.assertNotIn("mixed", self.db.table_names())

    def test_to_batches_holds_one_batch(self):
        tbl = self.db.create_table("big", schema={"id": "int64", "worker": "string"})
        n, chunk = 1_000_000, 100_000
        for start in range(0, n, chunk):
            tbl.add([{"id": i, "worker": "w%02d" % (i % 50)} for i in range(start, start + chunk)])
        self.assertEqual(tbl.count_rows(), n)
        gc.collect()
        before = rss_mib()
        seen = total = 0
        most = before
        for batch in tbl.to_batches(batch_size=10_000):
            self.assertLessEqual(len(batch), 10_000)
            seen += len(batch)
            total += sum(r["id"] for r in batch)
            most = max(most, rss_mib())
        grew_mib = most - before
        print(f"\nto_batches: {seen} rows; resident memory grew {grew_mib:.1f} MiB at most", file=sys.stderr)
        self.assertEqual((seen, total), (n, n * (n - 1) // 2))
        # The whole table as dicts is several hundred MiB; a batch is a few.
        self.assertLess(grew_mib, 64)
        self.db.drop_table("big")

    def test_a_connection_outlives_the_thread_that_made_it(self):
        box = []
        t = threading.Thread(target=lambda: box.append(strata_client.connect(os.path.join(self.tmp, "threaded"))))
        t.start()
        t.join()
        with box[0] as db:
            tbl = db.create_table("t", data=[{"a": 1}, {"a": 2}])
            self.assertEqual(tbl.count_rows(), 2)

    def test_no_server_outlives_a_killed_python(self):
        code = ("import sys, time; sys.path.insert(0, %r); import strata_client; "
                "db = strata_client.connect(%r); print(db._server._proc.pid, flush=True); time.sleep(120)"
                % (os.path.join(os.path.dirname(__file__), ".."), os.path.join(self.tmp, "killed")))
        py = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        try:
            pid = int(py.stdout.readline())
        finally:
            py.kill()
            py.wait()
            py.stdout.close()
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, 9)
        self.fail("the server of a SIGKILLed Python is still running after 10 s")

    def test_create_table_from_a_generator(self):
        # The rows are read once, to infer the schema and to add them.
        tbl = self.db.create_table("generated", data=({"a": i} for i in range(5)))
        self.assertEqual(tbl.count_rows(), 5)
        self.db.drop_table("generated")

    def test_no_binary(self):
        saved = os.environ["STRATA_BIN"]
        path = os.environ.get("PATH", "")
        try:
            os.environ["STRATA_BIN"] = ""
            os.environ["PATH"] = self.tmp + "/nowhere"
            with self.assertRaises(StrataConnectionError) as e:
                strata_client.connect(os.path.join(self.tmp, "other"))
            self.assertIn("STRATA_BIN", str(e.exception))
        finally:
            os.environ["STRATA_BIN"], os.environ["PATH"] = saved, path

    def test_a_bad_bucket_says_why(self):
        with self.assertRaises(StrataConnectionError) as e:
            strata_client.connect("nosuch://bucket")
        self.assertIn("nosuch", str(e.exception))


if __name__ == "__main__":
    unittest.main()
