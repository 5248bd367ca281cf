"""The Python client over TLS, against the strata serve at URL that
e2e/tls_test.go starts on MinIO with a CA of its own and a tokens file:
with the CA, the fleet's token appends and reads its own rows; trusting
another CA, the client is refused at once with StrataTLSError; the
reader's token cannot append (403 naming the grant).

    python3 tls_e2e.py URL FLEET_TOKEN READER_TOKEN CA OTHER_CA
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from strata_client import Client, StrataError, StrataTLSError  # noqa: E402


def main(url, fleet, reader, ca, other_ca):
    c = Client(url, token=fleet, ca=ca)
    n = c.append("runs/py", [{"id": i, "msg": "py-%d" % i} for i in range(100, 110)], idempotency_key="tls-e2e-py")
    assert n == 10, n
    rows = c.scan("runs/py")
    ids = sorted(r["id"] for r in rows)
    assert ids == list(range(100, 110)), ids

    start = time.monotonic()
    try:
        Client(url, token=fleet, ca=other_ca).append("runs/py", [{"id": 1, "msg": "x"}])
        raise AssertionError("a client trusting another CA appended")
    except StrataTLSError as e:
        assert "not trusted" in str(e), e
    assert time.monotonic() - start < 5, "the refused handshake was sent again"

    try:
        Client(url, token=reader, ca=ca).append("runs/py", [{"id": 2, "msg": "x"}])
        raise AssertionError("the reader's token appended")
    except StrataError as e:
        assert e.status == 403 and "append:runs/py" in e.message, e
    print("python over TLS: appended and read 10 rows; another CA and the reader's append refused")


if __name__ == "__main__":
    main(*sys.argv[1:6])
