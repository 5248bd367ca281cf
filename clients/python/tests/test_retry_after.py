"""A 429 with Retry-After is sent again no sooner than the server asked, and not
at all when that would end past ``retry_for``."""

import http.server
import json
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from strata_client import Client, StrataError  # noqa: E402


class BusyOnce(http.server.BaseHTTPRequestHandler):
    """Answers the first request 429 with the server's ``after``, the next with
    a table's description, and records when each came."""

    def do_GET(self):
        srv = self.server
        srv.times.append(time.monotonic())
        if len(srv.times) == 1:
            body = json.dumps({"error": {"code": "busy", "message": "the memory budget is held"}}).encode()
            self.send_response(429)
            self.send_header("Retry-After", srv.after)
        else:
            body = json.dumps({"name": "t", "version": 1}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class RetryAfterTest(unittest.TestCase):
    def setUp(self):
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BusyOnce)
        self.srv.times, self.srv.after = [], "1"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.client = Client(f"http://127.0.0.1:{self.srv.server_address[1]}", retry_for=10)

    def test_the_wait_asked_for_is_waited_out(self):
        self.client.describe("t")
        self.assertEqual(len(self.srv.times), 2)
        self.assertGreaterEqual(self.srv.times[1] - self.srv.times[0], 0.95)

    def test_a_wait_past_retry_for_is_not_waited(self):
        self.srv.after = "3600"
        with self.assertRaises(StrataError) as e:
            self.client.describe("t")
        self.assertEqual(e.exception.status, 429)
        self.assertEqual(len(self.srv.times), 1)


if __name__ == "__main__":
    unittest.main()
