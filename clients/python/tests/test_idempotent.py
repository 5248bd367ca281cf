"""Named appends through a proxy that loses answers, and a server killed and
restarted while they run: every append acknowledged, each stored once."""

import http.client
import http.server
import os
import random
import shutil
import signal
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


class LossyProxy(http.server.ThreadingHTTPServer):
    """Passes each request to the server, then drops a share ``lose`` of the answers:
    the server acted, the client hears nothing but a closed connection. Given
    several servers' ports, it sends each request to the next one in turn, as a
    Service in front of replicas with no affinity may."""

    daemon_threads = True

    def __init__(self, port, target_port, lose, seed):
        self.targets = list(target_port) if isinstance(target_port, (list, tuple)) else [target_port]
        self.lose, self.rng, self.lock = lose, random.Random(seed), threading.Lock()
        self.lost, self.sent = 0, 0
        super().__init__(("127.0.0.1", port), _ProxyHandler)

    def target(self):
        with self.lock:
            self.sent += 1
            return self.targets[self.sent % len(self.targets)]

    def drop(self):
        with self.lock:
            if self.rng.random() < self.lose:
                self.lost += 1
                return True
            return False


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.server.target(), timeout=30)
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
        except OSError:
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.server.drop():
            self.close_connection = True
            return
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _forward


class LostAnswersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="strata-py-idem-")
        self.binary = strata_binary(self.tmp)
        self.port = free_port()
        self.proc = None
        self.start_server()

    def tearDown(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_server(self):
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--bucket", "file://" + os.path.join(self.tmp, "tables"),
             "--listen", f"127.0.0.1:{self.port}", "--instance", "py-idem"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_up(f"http://127.0.0.1:{self.port}")

    def test_lost_answers_and_restarts_store_each_append_once(self):
        seed = int(os.environ.get("STRATA_SEED", time.time_ns()))
        print(f"seed {seed}", file=sys.stderr)
        proxy = LossyProxy(free_port(), self.port, 0.05, seed)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        self.addCleanup(proxy.server_close)
        self.addCleanup(proxy.shutdown)
        c = Client(f"http://127.0.0.1:{proxy.server_address[1]}")
        self.addCleanup(c.close)
        c.create_table("t", [{"name": "id", "type": "int64"}])
        acked, errors = [], []

        def appender(w):
            for i in range(100):
                ids = [w * 100_000 + i * 10 + k for k in range(10)]
                try:
                    n = c.append("t", [{"id": x} for x in ids])
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    errors.append(f"worker {w} append {i}: {e!r}")
                    return
                self.assertEqual(n, 10)
                acked.extend(ids)

        threads = [threading.Thread(target=appender, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for _ in range(2):  # the server is killed and restarted twice meanwhile
            time.sleep(1.0)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.start_server()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(acked), 4000)
        self.assertGreater(proxy.lost, 0, "no answer was lost: the test tested nothing")
        direct = Client(f"http://127.0.0.1:{self.port}")
        self.addCleanup(direct.close)
        direct.checkpoint_lsm("t")
        ids = [r["id"] for r in direct.scan("t", columns=["id"])]
        print(f"{proxy.lost} answers lost; {len(ids)} rows stored", file=sys.stderr)
        self.assertEqual(len(ids), 4000, "rows doubled or missing")
        self.assertEqual(sorted(ids), sorted(acked))


if __name__ == "__main__":
    unittest.main()
