"""Reads the server's ``format=npz`` answer (a zip of NumPy arrays; see
``GET /api/v1/openapi.json``) into one array per column."""

import io
from typing import Any, Dict

NPZ = "application/x-npz"


def columns(data: bytes) -> Dict[str, Any]:
    """The columns of an npz answer, in order: numbers, booleans, timestamps
    (``datetime64``, UTC) and dates as NumPy arrays of their type, strings as
    an object array of ``str`` and binary of ``bytes``; a column with nulls as
    a ``numpy.ma.MaskedArray`` whose mask is true where a value is null (None
    in a string or binary column, zero in the others)."""
    import numpy as np

    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        names = [str(n) for n in z["columns"]]
        types = [str(t) for t in z["types"]]
        chunks = len(z["rows"])
        files = set(z.files)
        out = {}
        for i, (name, kind) in enumerate(zip(names, types)):
            parts, masks = [], []
            for k in range(chunks):
                key = f"{k}/{i}"
                values = z[key]
                if key + ".offsets" in files:
                    values = _split(values, z[key + ".offsets"], kind.endswith("string"))
                parts.append(values)
                masks.append(z[key + ".mask"] if key + ".mask" in files else None)
            out[name] = _joined(np, parts, masks)
        return out


def _split(data, offsets, text):
    """The values of a string (text) or binary column: its bytes cut at its
    offsets."""
    b = data.tobytes()
    o = offsets.tolist()
    if not text:
        return [b[o[j]:o[j + 1]] for j in range(len(o) - 1)]
    if b.isascii():  # one decode, then cuts of the string
        s = b.decode("ascii")
        return [s[o[j]:o[j + 1]] for j in range(len(o) - 1)]
    return [b[o[j]:o[j + 1]].decode("utf-8") for j in range(len(o) - 1)]


def _joined(np, parts, masks):
    # The server writes a chunk even for no rows, so that each array has
    # its column's type.
    if isinstance(parts[0], list):
        values = np.empty(sum(len(p) for p in parts), dtype=object)
        at = 0
        for p in parts:
            values[at:at + len(p)] = p
            at += len(p)
    else:
        values = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if all(m is None for m in masks):
        return values
    mask = np.concatenate([np.zeros(len(p), dtype=bool) if m is None else m for p, m in zip(parts, masks)])
    if values.dtype == object:
        values[mask] = None
    return np.ma.MaskedArray(values, mask=mask)
