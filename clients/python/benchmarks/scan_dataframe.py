"""Times reading a table into a pandas DataFrame, as dicts (``scan``) and as
CSV (``scan_dataframe``), against a running ``strata serve``:

    python3 clients/python/benchmarks/scan_dataframe.py http://127.0.0.1:8080 [rows]

It creates the table ``bench_frames`` (rows of id, worker, reward, step) once,
then reads it three times each way and prints the best time of each."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pandas as pd  # noqa: E402

from strata_client import Client, StrataError  # noqa: E402


def main():
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
    with Client(url) as c:
        try:
            c.create_table("bench_frames", [{"name": "id", "type": "int64"}, {"name": "worker", "type": "string"},
                                            {"name": "reward", "type": "float64"}, {"name": "step", "type": "int32"}])
            for start in range(0, rows, 50_000):
                n = min(50_000, rows - start)
                c.append("bench_frames", pd.DataFrame({"id": range(start, start + n), "worker": ["w%d" % (i % 16) for i in range(n)],
                                                       "reward": [i / 7 for i in range(n)], "step": [i % 1000 for i in range(n)]}))
            c.checkpoint_lsm("bench_frames")
        except StrataError as e:
            if e.status != 409:
                raise
        for name, read in (("dicts", lambda: pd.DataFrame(list(c.scan("bench_frames")))),
                           ("scan_dataframe", lambda: c.scan_dataframe("bench_frames"))):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                df = read()
                best = min(best, time.perf_counter() - start)
            print(f"{name}: {len(df)} rows in {best:.2f} s ({len(df) / best:,.0f} rows/s)")


if __name__ == "__main__":
    main()
