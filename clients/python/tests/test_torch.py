"""Tests of scan_numpy and of the PyTorch dataset against a real ``strata
serve`` on a folder (the end-to-end run on MinIO is e2e/dataset_test.go)."""

import os
import sys
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from test_client import FolderServer  # noqa: E402
from strata_client import Client  # noqa: E402

try:
    import numpy as np
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - the install step provides them
    np = None


def needs_torch(test):
    """Under CI a missing numpy or torch fails the test (the install step is
    broken); elsewhere it is skipped."""
    if np is not None:
        return test
    if os.environ.get("CI", "") not in ("", "0", "false"):
        def failing(self):
            self.fail("numpy and torch are not importable: scripts/install-test-deps.sh installs Debian's python3-torch")
        return failing
    return unittest.skip("numpy and torch are not importable")(test)


SCHEMA = [{"name": "id", "type": "int64"}, {"name": "x", "type": "float32"}, {"name": "k", "type": "int16", "nullable": True},
          {"name": "ok", "type": "bool"}, {"name": "s", "type": "string", "nullable": True},
          {"name": "at", "type": "timestamp_us", "nullable": True}, {"name": "raw", "type": "binary", "nullable": True}]


class NumpyAndTorchTest(unittest.TestCase):
    table = "train"
    rows = 5000

    @classmethod
    def setUpClass(cls):
        cls.server = FolderServer("strata-py-torch-")
        cls.c = c = cls.server.client
        if np is None:
            return
        c.create_table(cls.table, SCHEMA)
        for start in range(0, cls.rows, 1250):  # four fragments
            c.append(cls.table, [{"id": i, "x": i / 4, "k": None if i % 10 == 0 else i % 100, "ok": i % 2 == 0,
                                  "s": None if i % 7 == 0 else "é%d" % i, "at": None if i % 9 == 0 else "2026-12-07T10:00:%02dZ" % (i % 60),
                                  "raw": None if i % 11 == 0 else "AAE="} for i in range(start, start + 1250)])
            c.checkpoint_lsm(cls.table)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    @needs_torch
    def test_scan_numpy_types_nulls_and_slices(self):
        c = self.c
        cols = c.scan_numpy(self.table, filter="id < 20")
        self.assertEqual(list(cols), [f["name"] for f in SCHEMA])
        self.assertEqual(cols["id"].tolist(), list(range(20)))
        self.assertEqual(cols["x"].dtype, np.float32)
        self.assertEqual(cols["x"][3], 0.75)
        self.assertTrue(np.ma.isMaskedArray(cols["k"]))
        self.assertEqual(cols["k"].dtype, np.int16)
        self.assertEqual(cols["k"].mask.tolist()[:11], [True] + [False] * 9 + [True])
        self.assertEqual(cols["ok"].dtype, bool)
        self.assertEqual(cols["s"][1], "é1")
        self.assertIsNone(cols["s"].data[0])
        self.assertEqual(cols["at"].dtype, np.dtype("datetime64[us]"))
        self.assertEqual(str(cols["at"][1]), "2026-12-07T10:00:01.000000")
        self.assertEqual(cols["raw"][1], b"\x00\x01")
        # No rows: every column, of its type.
        empty = c.scan_numpy(self.table, columns=["id", "s", "at"], filter="id < 0")
        self.assertEqual({k: (len(v), v.dtype) for k, v in empty.items()},
                         {"id": (0, np.int64), "s": (0, object), "at": (0, np.dtype("datetime64[us]"))})
        # The slices of a version's fragments read its rows once.
        listed = c.fragments(self.table)
        got = [c.scan_numpy(self.table, columns=["id"], version=listed["version"], fragment=f["id"], offsets=(lo, lo + 500))["id"]
               for f in listed["fragments"] for lo in range(0, f["rows"], 500)]
        self.assertEqual(np.concatenate(got).tolist(), list(range(self.rows)))
        with self.assertRaises(ValueError):
            c.scan_numpy(self.table, offsets=(0, 5))
        # A client that wrote to the table reads slices all the same (not
        # its writes not merged yet: a slice is of a version's fragment).
        mine = Client(self.c.base)
        mine.create_table("own", [{"name": "id", "type": "int64"}])
        mine.append("own", [{"id": 1}])
        mine.checkpoint_lsm("own")
        mine.append("own", [{"id": 2}])
        f = mine.fragments("own")["fragments"][0]
        self.assertEqual(mine.scan_numpy("own", fragment=f["id"])["id"].tolist(), [1])
        self.assertEqual(sorted(mine.scan_numpy("own")["id"].tolist()), [1, 2])

    def dataset(self, **kw):
        from strata_client.torch import TableDataset
        kw.setdefault("columns", ["id", "x", "ok", "s"])
        kw.setdefault("batch_size", 300)
        kw.setdefault("slice_rows", 700)
        return TableDataset(self.c, self.table, **kw)

    @staticmethod
    def ids(batches):
        return [i for b in batches for i in b["id"].tolist()]

    @needs_torch
    def test_ranks_and_workers_read_each_row_once_in_a_seeded_order(self):
        version = self.c.fragments(self.table)["version"]
        orders = {}
        for epoch in (0, 1):
            for seed in (1, 2):
                got = []
                for rank in range(3):
                    ds = self.dataset(version=version, rank=rank, world_size=3, shuffle=True, seed=seed)
                    ds.set_epoch(epoch)
                    batches = list(ds.loader(num_workers=2))
                    self.assertTrue(all(len(b["id"]) <= 300 for b in batches))
                    self.assertIsInstance(batches[0]["s"], list)
                    self.assertEqual(batches[0]["x"].dtype, torch.float32)
                    got.extend(self.ids(batches))
                self.assertEqual(sorted(got), list(range(self.rows)), f"epoch {epoch}, seed {seed}")
                orders[epoch, seed] = got
        self.assertNotEqual(orders[0, 1], orders[1, 1])
        self.assertNotEqual(orders[0, 1], orders[0, 2])
        again = self.dataset(version=version, rank=0, world_size=3, shuffle=True, seed=1)
        again.set_epoch(1)
        self.assertEqual(self.ids(again.loader(num_workers=2)), orders[1, 1][:len(self.ids(again))])
        plain = self.ids(self.dataset(version=version))
        self.assertEqual(plain, list(range(self.rows)))
        stamps = list(self.dataset(version=version, columns=["at"], filter="at IS NOT NULL"))
        self.assertEqual(stamps[0]["at"].dtype, torch.int64)
        self.assertEqual(stamps[0]["at"][0].item(), 1796637601000000)  # 2026-12-07T10:00:01Z in µs

    @needs_torch
    def test_a_saved_state_resumes_with_no_row_repeated_or_skipped(self):
        version = self.c.fragments(self.table)["version"]
        def make(epoch):
            ds = self.dataset(version=version, rank=1, world_size=2, shuffle=True, seed=5, filter="id % 3 != 0")
            ds.set_epoch(epoch)
            return ds

        want = {e: self.ids(make(e).loader()) for e in (3, 4)}
        self.assertNotEqual(sorted(want[3]), sorted(want[4]))  # a rank's slices change with the epoch
        for workers_before, workers_after in ((2, 1), (0, 2), (1, 0)):
            ds = make(3)
            it = iter(ds.loader(num_workers=workers_before))
            before = self.ids([next(it) for _ in range(4)])
            state = ds.state_dict()
            del it
            resumed = self.dataset(version=version, rank=1, world_size=2, shuffle=True, seed=5, filter="id % 3 != 0")
            resumed.load_state_dict(state)
            after = self.ids(resumed.loader(num_workers=workers_after))
            # Another number of workers interleaves the slices otherwise.
            self.assertEqual(len(before + after), len(set(before + after)), f"{workers_before} workers, then {workers_after}")
            self.assertEqual(sorted(before + after), sorted(want[3]), f"{workers_before} workers, then {workers_after}")
            # The epoch ended: the next pass of the same epoch reads it all.
            self.assertEqual(sorted(self.ids(resumed.loader(num_workers=workers_after))), sorted(want[3]))
            resumed.set_epoch(4)
            self.assertEqual(sorted(self.ids(resumed)), sorted(want[4]))

    @needs_torch
    def test_unsigned_columns_and_a_plain_loader_after_a_pass(self):
        c = self.c
        c.create_table("uints", [{"name": "id", "type": "int64"}, {"name": "a", "type": "uint16"},
                                 {"name": "b", "type": "uint32"}, {"name": "c", "type": "uint64"}, {"name": "d", "type": "uint8"}])
        c.append("uints", [{"id": i, "a": 65535 - i, "b": 4294967295 - i, "c": i, "d": 255 - i} for i in range(10)])
        c.checkpoint_lsm("uints")
        from strata_client.torch import TableDataset
        ds = TableDataset(c, "uints", batch_size=4)
        batch = next(iter(ds))
        self.assertEqual([batch[k].dtype for k in "abcd"], [torch.int32, torch.int64, torch.int64, torch.uint8])
        self.assertEqual(batch["a"][0].item(), 65535)
        self.assertEqual(batch["b"][0].item(), 4294967295)
        c.append("uints", [{"id": 10, "a": 0, "b": 0, "c": 1 << 63, "d": 0}])
        c.checkpoint_lsm("uints")
        with self.assertRaisesRegex(ValueError, "column 'c' holds uint64 values past"):
            list(TableDataset(c, "uints", batch_size=4))
        # A pass in this process, then a plain DataLoader with workers: they
        # read the epoch again, as a second pass here would.
        from torch.utils.data import DataLoader
        ds = self.dataset(version=self.c.fragments(self.table)["version"])
        self.assertEqual(len(self.ids(ds)), self.rows)
        with warnings.catch_warnings(record=True):
            got = [i for b in DataLoader(ds, batch_size=None, num_workers=2) for i in b["id"].tolist()]
        self.assertEqual(sorted(got), list(range(self.rows)))

    @needs_torch
    def test_what_the_dataset_refuses(self):
        version = self.c.fragments(self.table)["version"]
        with self.assertRaisesRegex(ValueError, "give version="):
            self.dataset(rank=0, world_size=2)
        with self.assertRaisesRegex(ValueError, "rank 2 of world size 2"):
            self.dataset(version=version, rank=2, world_size=2)
        state = self.dataset(version=version, seed=1).state_dict()
        with self.assertRaisesRegex(ValueError, "seed=1"):
            self.dataset(version=version, seed=2).load_state_dict(state)
        with self.assertRaisesRegex(ValueError, "column 'k' has nulls"):
            list(self.dataset(version=version, columns=["k"]))
        with self.assertRaisesRegex(ValueError, "persistent_workers"):
            self.dataset(version=version).loader(num_workers=1, persistent_workers=True)
        from torch.utils.data import DataLoader
        with warnings.catch_warnings(record=True):
            # A plain DataLoader reads every row too; only state_dict() is blind to it.
            got = [i for b in DataLoader(self.dataset(version=version), batch_size=None, num_workers=2) for i in b["id"].tolist()]
        self.assertEqual(sorted(got), list(range(self.rows)))


if __name__ == "__main__":
    unittest.main()
