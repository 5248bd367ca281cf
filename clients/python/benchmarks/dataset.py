"""Times reading a 5-column numeric table into tensors, against a running
``strata serve`` whose bucket is BUCKET (a folder's file:// URL or s3://...):

    python3 clients/python/benchmarks/dataset.py http://127.0.0.1:8080 file:///path/to/tables [rows]

It creates the table ``bench_tensors`` (id int64, step int32, reward
float32, value float64, done bool) once, then reads it three times each way
and prints the best rows/s of each: the dataset (TableDataset, no DataLoader
workers and two), JSON lines (``scan``) made into tensors batch by batch,
and ``strata scan --format csv`` into a file (STRATA_BIN, or ``strata`` on
the PATH), straight from the bucket."""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from strata_client import Client, StrataError  # noqa: E402
from strata_client.torch import TableDataset  # noqa: E402

TABLE = "bench_tensors"
COLUMNS = ["id", "step", "reward", "value", "done"]


def json_lines(c, batch_size=1024):
    rows = 0
    buf = []

    def emit(buf):
        return {k: torch.tensor([r[k] for r in buf]) for k in COLUMNS}

    for r in c.scan(TABLE):
        buf.append(r)
        if len(buf) == batch_size:
            rows += len(emit(buf)["id"])
            buf = []
    if buf:
        rows += len(emit(buf)["id"])
    return rows


def dataset(c, workers):
    ds = TableDataset(c, TABLE, batch_size=1024)
    return sum(len(b["id"]) for b in ds.loader(num_workers=workers))


def csv_file(bucket):
    with tempfile.NamedTemporaryFile(suffix=".csv") as f:
        subprocess.run([os.environ.get("STRATA_BIN", "strata"), "scan", bucket.rstrip("/") + "/" + TABLE, "--format", "csv"],
                       stdout=f, check=True)
        return sum(1 for _ in open(f.name, "rb")) - 1


def main():
    url, bucket = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    with Client(url) as c:
        try:
            c.create_table(TABLE, [{"name": "id", "type": "int64"}, {"name": "step", "type": "int32"}, {"name": "reward", "type": "float32"},
                                   {"name": "value", "type": "float64"}, {"name": "done", "type": "bool"}])
            for start in range(0, rows, 100_000):
                ids = np.arange(start, min(start + 100_000, rows))
                c.append(TABLE, pd.DataFrame({"id": ids, "step": (ids % 500).astype("int32"), "reward": (ids % 97 / 97).astype("float32"),
                                              "value": ids / 3.0, "done": ids % 500 == 499}))
            c.checkpoint_lsm(TABLE)
        except StrataError as e:
            if e.status != 409:
                raise
        for name, read in (("dataset, 0 workers", lambda: dataset(c, 0)), ("dataset, 2 workers", lambda: dataset(c, 2)),
                           ("JSON lines into tensors", lambda: json_lines(c)), ("strata scan --format csv into a file", lambda: csv_file(bucket))):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                n = read()
                best = min(best, time.perf_counter() - start)
            print(f"{name}: {n} rows in {best:.2f} s ({n / best:,.0f} rows/s)")


if __name__ == "__main__":
    main()
