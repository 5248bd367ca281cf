"""The dataset end to end, against the strata serve at URL (e2e/dataset_test.go
runs it on MinIO): a 200,000-row table read by 4 ranks (processes) of 2
DataLoader workers each, every row once per epoch, in an order the seed and
the epoch decide; a rank killed mid-epoch resumes from its saved state with
no row repeated or skipped.

    python3 torch_e2e.py URL                 # the whole check
    python3 torch_e2e.py URL rank ...        # one rank (the check runs these)
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from strata_client import Client  # noqa: E402

TABLE, ROWS, WORLD, SEED = "rollouts", 200_000, 4, 11


def rank_main(a):
    from strata_client.torch import TableDataset

    ds = TableDataset(Client(a.url), TABLE, columns=["id", "step", "reward", "value", "done"], version=a.version,
                      batch_size=1000, shuffle=True, seed=SEED, rank=a.rank, world_size=WORLD)
    ds.set_epoch(a.epoch)
    if a.resume:
        with open(a.resume) as f:
            ds.load_state_dict(json.load(f))
    got = []
    for n, batch in enumerate(ds.loader(num_workers=2), 1):
        assert set(batch) == {"id", "step", "reward", "value", "done"}, batch.keys()
        got.extend(batch["id"].tolist())
        if a.checkpoint_after and n == a.checkpoint_after:
            # What a trainer saves with its model: the rows it learned from
            # so far, and where the data is.
            np.save(a.out + ".before.npy", np.array(got, dtype=np.int64))
            with open(a.state + ".tmp", "w") as f:
                json.dump(ds.state_dict(), f)
            os.rename(a.state + ".tmp", a.state)
        if a.checkpoint_after and n > a.checkpoint_after:
            time.sleep(0.2)  # learning; killed here
    np.save(a.out, np.array(got, dtype=np.int64))


def run_ranks(url, version, epoch, tmp, only=None):
    procs, outs = [], []
    for r in range(WORLD) if only is None else [only]:
        out = os.path.join(tmp, f"e{epoch}-r{r}-{time.monotonic_ns()}.npy")
        procs.append(subprocess.Popen([sys.executable, __file__, url, "rank", str(r), str(version), str(epoch), out]))
        outs.append(out)
    for p in procs:
        if p.wait(timeout=600) != 0:
            raise SystemExit(f"a rank exited {p.returncode}")
    return [np.load(o).tolist() for o in outs]


def check_main(url):
    c = Client(url)
    c.create_table(TABLE, [{"name": "id", "type": "int64"}, {"name": "step", "type": "int32"}, {"name": "reward", "type": "float32"},
                           {"name": "value", "type": "float64"}, {"name": "done", "type": "bool"}])
    for start in range(0, ROWS, 50_000):
        ids = np.arange(start, start + 50_000)
        c.append(TABLE, pd.DataFrame({"id": ids, "step": (ids % 500).astype("int32"), "reward": (ids % 97 / 97).astype("float32"),
                                      "value": ids / 3.0, "done": ids % 500 == 499}))
    c.checkpoint_lsm(TABLE)
    version = c.fragments(TABLE)["version"]
    with tempfile.TemporaryDirectory() as tmp:
        epochs = {}
        for epoch in (0, 1):
            ranks = run_ranks(url, version, epoch, tmp)
            every = sorted(i for r in ranks for i in r)
            if every != list(range(ROWS)):
                raise SystemExit(f"epoch {epoch}: {len(every)} rows read, {len(set(every))} distinct; want each of {ROWS} once")
            epochs[epoch] = ranks
            print(f"epoch {epoch}: {ROWS} rows, each once, over {WORLD} ranks of {[len(r) for r in ranks]} rows")
        if epochs[0] == epochs[1]:
            raise SystemExit("epochs 0 and 1 read the rows in the same order")
        if run_ranks(url, version, 0, tmp, only=1)[0] != epochs[0][1]:
            raise SystemExit("rank 1 read epoch 0 in another order with the same seed")
        print("epochs 0 and 1 differ; epoch 0 again is the same order")
        # Rank 2 of epoch 1 saves its state after 20 batches and is killed
        # while it goes on; started again from the state, it reads the rest.
        out, state = os.path.join(tmp, "killed.npy"), os.path.join(tmp, "state.json")
        p = subprocess.Popen([sys.executable, __file__, url, "rank", "2", str(version), "1", out,
                              "--checkpoint-after", "20", "--state", state], start_new_session=True)
        for _ in range(1200):
            if os.path.exists(state) or p.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(1)  # some batches past the state
        if p.poll() is not None:
            raise SystemExit(f"rank 2 ended ({p.returncode}) before it was killed")
        os.killpg(p.pid, signal.SIGKILL)  # the rank and its DataLoader workers, as a lost node
        p.wait()
        before = np.load(out + ".before.npy").tolist()
        after = os.path.join(tmp, "resumed.npy")
        r = subprocess.run([sys.executable, __file__, url, "rank", "2", str(version), "1", after, "--resume", state])
        if r.returncode != 0:
            raise SystemExit("the resumed rank failed")
        resumed = np.load(after).tolist()
        both = before + resumed
        if len(both) != len(set(both)) or sorted(both) != sorted(epochs[1][2]):
            raise SystemExit(f"killed and resumed: {len(before)} + {len(resumed)} rows, {len(set(both))} distinct; "
                             f"want rank 2's {len(epochs[1][2])} of epoch 1, each once")
        print(f"rank 2 killed after its state at {len(before)} rows; resumed with {len(resumed)}: each of its rows once")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "rank":
        p = argparse.ArgumentParser()
        p.add_argument("url")
        p.add_argument("mode")
        p.add_argument("rank", type=int)
        p.add_argument("version", type=int)
        p.add_argument("epoch", type=int)
        p.add_argument("out")
        p.add_argument("--checkpoint-after", type=int, default=0)
        p.add_argument("--state")
        p.add_argument("--resume")
        rank_main(p.parse_args())
    else:
        check_main(sys.argv[1])
