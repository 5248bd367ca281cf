"""A consumer group's members over HTTP from Python, against a real
``strata serve`` on a folder."""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from test_client import FolderServer  # noqa: E402


class GroupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = FolderServer("strata-py-groups-")
        cls.c = cls.server.client

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_members_share_the_changes_and_follow_leaves_on_close(self):
        c = self.c
        c.create_table("events", [{"name": "id", "type": "int64"}])
        for start in range(0, 40, 10):
            c.append("events", [{"id": i} for i in range(start, start + 10)])
            c.checkpoint_lsm("events")
        a_rows, _, a_ack = c.group_changes("events", "g", "a")  # alone: all
        self.assertEqual(sorted(r["id"] for r in a_rows), list(range(40)))
        self.assertTrue(all("_unit" in r and r["_change"] == "insert" for r in a_rows))
        rows, _, a_ack = c.group_changes("events", "g", "a", ack=a_ack)  # done with them: recorded
        self.assertEqual((rows, a_ack), ([], None))
        for start in range(40, 100, 10):
            c.append("events", [{"id": i} for i in range(start, start + 10)])
            c.checkpoint_lsm("events")
        b_rows, _, b_ack = c.group_changes("events", "g", "b")  # joins: its share
        a_rows, _, a_ack = c.group_changes("events", "g", "a", ack=a_ack)  # a's acknowledged: the rest
        seen = sorted(r["id"] for r in a_rows + b_rows)
        self.assertEqual(seen, list(range(40, 100)))  # each new row once (no lapse, no crash)
        self.assertTrue(a_rows and b_rows)
        c.group_changes("events", "g", "b", ack=b_ack)
        c.group_changes("events", "g", "a", ack=a_ack)
        # A follow as member a, closed after one run, leaves: b then owns
        # every partition.
        c.append("events", [{"id": i} for i in range(100, 110)])
        c.checkpoint_lsm("events")
        run = c.follow("events", group="g", member="a", wait=1)
        rows, through = next(run)
        run.close()
        b_rows, _, b_ack = c.group_changes("events", "g", "b")
        self.assertEqual(sorted(r["id"] for r in rows + b_rows), list(range(100, 110)))
        with self.assertRaises(ValueError):
            next(c.follow("events", group="g"))


    def test_stream_dataset_splits_new_rows_between_ranks(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            if os.environ.get("CI", "") not in ("", "0", "false"):
                self.fail("torch is not importable: scripts/install-test-deps.sh installs Debian's python3-torch")
            self.skipTest("torch is not importable")
        from strata_client.torch import StreamDataset
        c = self.c
        c.create_table("online", [{"name": "id", "type": "int64"}, {"name": "reward", "type": "float64", "nullable": True},
                                  {"name": "note", "type": "string"}])
        seen, lock, done = [], threading.Lock(), threading.Event()

        def rank(r):  # a rank's loop, in a thread of its own as in a process of its own
            for batch in StreamDataset(c, "online", "learners", batch_size=7, wait=0.5, rank=r, world_size=2):
                self.assertLessEqual(len(batch["id"]), 7)
                self.assertEqual(batch["reward"].dtype, torch.float64)
                self.assertIsInstance(batch["note"], list)
                with lock:
                    seen.extend(batch["id"].tolist())
                    if len(seen) >= 60:
                        done.set()

        for r in range(2):  # both in the group before rows land (a member joining later reads again what was not acknowledged)
            c.group_changes("online", "learners", "rank-%d" % r)
        for r in range(2):
            threading.Thread(target=rank, args=(r,), daemon=True).start()
        for start in range(0, 60, 10):
            c.append("online", [{"id": i, "reward": None if i % 5 == 0 else i / 2, "note": "n%d" % i} for i in range(start, start + 10)])
            c.checkpoint_lsm("online")
        self.assertTrue(done.wait(30), f"the ranks read {len(seen)} rows of 60")
        time.sleep(1)  # nothing more comes
        self.assertEqual(sorted(seen), list(range(60)))  # each once: the ranks split them
        from torch.utils.data import DataLoader
        with self.assertRaisesRegex(RuntimeError, "num_workers=0"):  # a worker would acknowledge ahead of the trainer
            next(iter(DataLoader(StreamDataset(c, "online", "other"), batch_size=None, num_workers=1)))

if __name__ == "__main__":
    unittest.main()
