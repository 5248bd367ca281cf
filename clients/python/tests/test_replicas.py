"""The quick start through two replicas of ``strata serve`` on one bucket, behind
a proxy that sends each request to the other: a client reads its own appends at
once whichever replica answers, and a retry that reaches the other replica
stores nothing twice."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from strata_client import Client  # noqa: E402
from test_client import free_port, strata_binary, wait_up  # noqa: E402
from test_idempotent import LossyProxy  # noqa: E402

SCHEMA = [{"name": "id", "type": "int64"}, {"name": "reward", "type": "float64", "nullable": True}]


class ReplicasTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-py-replicas-")
        binary = strata_binary(self.tmp)
        self.ports, self.procs = [], []
        for name in ("a", "b"):
            port = free_port()
            log = open(os.path.join(self.tmp, name + ".log"), "wb")
            self.addCleanup(log.close)
            # Merges once an hour: what a read shows before, it read from the WAL.
            self.procs.append(subprocess.Popen(
                [binary, "serve", "--bucket", "file://" + os.path.join(self.tmp, "tables"),
                 "--listen", f"127.0.0.1:{port}", "--instance", name, "--flush-interval", "1h",
                 "--merge-interval", "1h"], stdout=subprocess.DEVNULL, stderr=log))
            self.ports.append(port)
            wait_up(f"http://127.0.0.1:{port}")

    def tearDown(self):
        for p in self.procs:
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def proxy(self, lose, seed=0):
        proxy = LossyProxy(free_port(), self.ports, lose, seed)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        self.addCleanup(proxy.server_close)
        self.addCleanup(proxy.shutdown)
        return f"http://127.0.0.1:{proxy.server_address[1]}", proxy

    def test_append_then_scan_sees_the_rows_from_either_replica(self):
        url, proxy = self.proxy(0.0)
        with Client(url) as c, Client(url, own_writes=False) as merged_only:
            c.create_table("rollouts", SCHEMA)
            for i in range(6):
                c.append("rollouts", [{"id": i, "reward": i / 2}])
                self.assertEqual(sorted(r["id"] for r in c.scan("rollouts")), list(range(i + 1)))
                self.assertEqual(c.describe("rollouts")["rows"], i + 1)
            self.assertEqual(list(merged_only.scan("rollouts")), [])
            self.assertGreater(proxy.sent, 12)
            # Once every replica merged, the rows are read once each.
            for port in self.ports:
                with Client(f"http://127.0.0.1:{port}") as direct:
                    direct.checkpoint_lsm("rollouts")
            self.assertEqual(sorted(r["id"] for r in merged_only.scan("rollouts")), list(range(6)))
            self.assertEqual(sorted(r["id"] for r in c.scan("rollouts")), list(range(6)))

    def test_retries_on_the_other_replica_store_each_row_once(self):
        seed = int(os.environ.get("STRATA_SEED", time.time_ns()))
        print(f"seed {seed}", file=sys.stderr)
        url, proxy = self.proxy(0.05, seed)
        with Client(url) as c:
            c.create_table("t", SCHEMA)
            acked = []
            for i in range(150):
                ids = [i * 10 + k for k in range(10)]
                self.assertEqual(c.append("t", [{"id": x} for x in ids]), 10)
                acked.extend(ids)
            self.assertGreater(proxy.lost, 0, "no answer was lost: the test tested nothing")
            self.assertEqual(sorted(r["id"] for r in c.scan("t", columns=["id"])), acked)
        for port in self.ports:
            with Client(f"http://127.0.0.1:{port}") as direct:
                direct.checkpoint_lsm("t")
        with Client(f"http://127.0.0.1:{self.ports[0]}", own_writes=False) as direct:
            ids = [r["id"] for r in direct.scan("t", columns=["id"])]
        print(f"{proxy.lost} answers lost; {len(ids)} rows stored", file=sys.stderr)
        self.assertEqual(sorted(ids), acked, "rows doubled or missing")


if __name__ == "__main__":
    unittest.main()
