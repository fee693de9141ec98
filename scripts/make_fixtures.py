#!/usr/bin/env python3
"""Writes kvlab's loader test fixtures into tests/fixtures/ (run from anywhere; needs numpy).

    python3 scripts/make_fixtures.py

Valid files are written by numpy itself (``numpy.lib.format.write_array``, ``numpy.savetxt``)
or, for .safetensors, by ``capture_kv.safetensors_bytes`` (struct + json, no safetensors
package). Their values follow closed forms of the C-order flat index ``i`` that the Rust tests
recompute (tests/io_loaders.rs), so the expectation is a formula, not copied output:

    half_minus_3   i * 0.5 - 3        (float dtypes, text, json)
    minus_3        i - 3              (signed integers)
    arange         i                  (unsigned integers)
    mod3           1 if i % 3 == 0    (bool)

``manifest.json`` lists every valid file with its shape, dtype, order, version and formula.
malformed/ holds broken files, each made to trigger one specific LoadError variant (the Rust test
names the variant per file). Output is deterministic: re-running rewrites identical bytes.
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_kv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent / "tests" / "fixtures"

RANK_SHAPES = {0: (), 1: (5,), 2: (3, 4), 3: (2, 3, 4), 4: (2, 3, 2, 2)}
DTYPES = [
    ("f2", "half_minus_3"), ("f4", "half_minus_3"), ("f8", "half_minus_3"),
    ("i1", "minus_3"), ("i2", "minus_3"), ("i4", "minus_3"), ("i8", "minus_3"),
    ("u1", "arange"), ("u2", "arange"), ("u4", "arange"), ("u8", "arange"),
    ("b1", "mod3"),
]


def values(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    """The closed-form values of a fixture, in C order, reshaped."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n)
    flat = {
        "half_minus_3": i * 0.5 - 3,
        "minus_3": i - 3,
        "arange": i,
        "mod3": (i % 3 == 0),
    }[kind]
    return flat.reshape(shape)


def npy_bytes(arr: np.ndarray, version: tuple[int, int] = (1, 0)) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    return buf.getvalue()


def raw_npy(header: str, data: bytes = b"", version: int = 1, pad: bool = True) -> bytes:
    """A .npy file with a hand-written header (for malformed cases)."""
    h = header.encode("latin-1") if version < 3 else header.encode("utf-8")
    len_size = 2 if version == 1 else 4
    if pad:
        total = 8 + len_size + len(h) + 1
        h += b" " * (-total % 64) + b"\n"
    fmt = "<H" if version == 1 else "<I"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(h)) + h + data


def raw_safetensors(header: dict | str | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    """A .safetensors file with a hand-written header (for malformed cases)."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


def write(rel: str, data: bytes) -> None:
    path = ROOT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def make_npy(manifest: list) -> None:
    for dtype, kind in DTYPES:
        size = int(dtype[1:])
        for endian in (["<", ">"] if size > 1 else ["|"]):
            descr = endian + dtype
            tag = {"<": "le", ">": "be", "|": "na"}[endian]
            combos = [(r, "C", (1, 0)) for r in RANK_SHAPES]
            combos += [(r, "F", (1, 0)) for r in (2, 3, 4)]
            combos += [(3, "F", (2, 0)), (3, "F", (3, 0))]
            for rank, order, version in combos:
                shape = RANK_SHAPES[rank]
                arr = np.array(values(kind, shape)).astype(descr)
                if order == "F":
                    arr = np.asfortranarray(arr)
                rel = f"npy/{dtype}_{tag}_{order.lower()}_r{rank}_v{version[0]}.npy"
                write(rel, npy_bytes(arr, version))
                manifest.append({"file": rel, "format": "npy", "shape": list(shape),
                                 "values": kind, "descr": descr, "fortran_order": order == "F",
                                 "version": list(version)})


def make_safetensors(manifest: list) -> None:
    f = lambda shape: values("half_minus_3", shape)  # noqa: E731
    tensors = {
        "f16": f((2, 3)).astype(np.float16),
        "bf16": capture_kv.BF16(f((3, 2))),
        "f32": f((2, 2, 2)).astype(np.float32),
        "f64": f((4,)).astype(np.float64),
        "scalar": f(()).astype(np.float32),
        "kv4": f((2, 2, 3, 2)).astype(np.float16),
        "i32": values("minus_3", (3,)).astype(np.int32),
        "u8": values("arange", (2,)).astype(np.uint8),
    }
    write("safetensors/all_dtypes.safetensors",
          capture_kv.safetensors_bytes(tensors, {"format": "pt", "note": "kvlab fixture"}))
    manifest.append({
        "file": "safetensors/all_dtypes.safetensors", "format": "safetensors",
        "tensors": [
            {"name": "f16", "dtype": "F16", "shape": [2, 3], "values": "half_minus_3"},
            {"name": "bf16", "dtype": "BF16", "shape": [3, 2], "values": "half_minus_3"},
            {"name": "f32", "dtype": "F32", "shape": [2, 2, 2], "values": "half_minus_3"},
            {"name": "f64", "dtype": "F64", "shape": [4], "values": "half_minus_3"},
            {"name": "scalar", "dtype": "F32", "shape": [], "values": "half_minus_3"},
            {"name": "kv4", "dtype": "F16", "shape": [2, 2, 3, 2], "values": "half_minus_3"},
            {"name": "i32", "dtype": "I32", "shape": [3], "values": None},
            {"name": "u8", "dtype": "U8", "shape": [2], "values": None},
        ]})
    # Header keys in reverse offset order: the reader must sort by data_offsets.
    a = f((2, 2)).astype(np.float32).tobytes()
    b = f((3,)).astype("<f4").tobytes()
    header = {"second": {"dtype": "F32", "shape": [3], "data_offsets": [len(a), len(a) + len(b)]},
              "first": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, len(a)]}}
    write("safetensors/unsorted_keys.safetensors", raw_safetensors(header, a + b))
    manifest.append({
        "file": "safetensors/unsorted_keys.safetensors", "format": "safetensors",
        "tensors": [
            {"name": "first", "dtype": "F32", "shape": [2, 2], "values": "half_minus_3"},
            {"name": "second", "dtype": "F32", "shape": [3], "values": "half_minus_3"},
        ]})


def make_text(manifest: list) -> None:
    m = values("half_minus_3", (3, 4))

    def table(rows: np.ndarray, sep: str, header: list | None = None, eol: str = "\n",
              quote: bool = False) -> bytes:
        lines = []
        if header is not None:
            lines.append(sep.join(f'"{h}"' if quote else h for h in header))
        for row in rows:
            lines.append(sep.join(f'"{float(v)!r}"' if quote else repr(float(v)) for v in row))
        return (eol.join(lines) + eol).encode("utf-8")

    cases = {
        "text/comma_header.csv": table(m, ",", ["t0", "t1", "t2", "t3"]),
        "text/tab.tsv": table(m, "\t"),
        "text/semicolon.csv": table(m, ";"),
        "text/crlf_quoted_bom.csv": b"\xef\xbb\xbf" + table(m, ", ", ["a", "b", "c", "d"], "\r\n", True),
    }
    for rel, data in cases.items():
        write(rel, data)
        manifest.append({"file": rel, "format": "csv", "shape": [3, 4], "values": "half_minus_3"})
    buf = io.StringIO()
    np.savetxt(buf, values("half_minus_3", (5, 2)), header="written by numpy.savetxt")
    write("text/savetxt.txt", buf.getvalue().encode("utf-8"))
    manifest.append({"file": "text/savetxt.txt", "format": "csv", "shape": [5, 2],
                     "values": "half_minus_3"})

    for rank in (1, 2, 3, 4):
        shape = RANK_SHAPES[rank]
        rel = f"text/nested_r{rank}.json"
        write(rel, json.dumps(values("half_minus_3", shape).tolist()).encode())
        manifest.append({"file": rel, "format": "json", "shape": list(shape),
                         "values": "half_minus_3"})
    for rank in (2, 3):
        shape = RANK_SHAPES[rank]
        rel = f"text/object_r{rank}.json"
        doc = {"shape": list(shape), "data": values("half_minus_3", shape).ravel().tolist()}
        write(rel, json.dumps(doc, indent=1).encode())
        manifest.append({"file": rel, "format": "json", "shape": list(shape),
                         "values": "half_minus_3"})


def fake_model_outputs(seed: int = 7, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                       tokens: int = 6, dim: int = 8):
    """What a causal LM returns for one prompt: per-layer [1, H, T, T] softmax attention (causal)
    and a legacy tuple cache of ([1, H_kv, T, d], [1, H_kv, T, d])."""
    rng = np.random.default_rng(seed)
    mask = np.tril(np.ones((tokens, tokens), dtype=bool))
    attentions = []
    cache = []
    for _ in range(layers):
        logits = rng.normal(size=(1, heads, tokens, tokens))
        logits = np.where(mask, logits, -np.inf)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        attentions.append((e / e.sum(axis=-1, keepdims=True)).astype(np.float32))
        cache.append((rng.normal(size=(1, kv_heads, tokens, dim)).astype(np.float32),
                      rng.normal(size=(1, kv_heads, tokens, dim)).astype(np.float32)))
    return attentions, tuple(cache)


def make_capture(manifest: list) -> None:
    attentions, cache = fake_model_outputs()
    for prefix, head, dtype in (("all_heads", None, "float32"), ("head2_f16", 2, "float16")):
        paths = capture_kv.save_capture(ROOT / "capture" / prefix, attentions, cache, layer=1,
                                        head=head, dtype=dtype, metadata={"model": "fake"})
        manifest.append({"file": f"capture/{prefix}", "format": "capture",
                         "roles": {r: str(p.relative_to(ROOT)) for r, p in paths.items()},
                         "head": head, "dtype": dtype})


def make_interpret() -> None:
    """Valid files whose contents fail (or warn in) the shape interpretation."""
    causal = np.tril(np.ones((4, 4), dtype=np.float32))
    causal /= causal.sum(axis=1, keepdims=True)
    neg = np.stack([causal, causal])
    neg[1, 2, 1] = -0.25
    write("interpret/attn_negative.npy", npy_bytes(neg))
    write("interpret/attn_unnormalised.npy", npy_bytes(causal * 3))
    write("interpret/attn_rank4.npy", npy_bytes(causal.reshape(1, 1, 4, 4)))
    write("interpret/attn_causal_t4.npy", npy_bytes(causal))
    write("interpret/kv_t5.npy", npy_bytes(values("half_minus_3", (5, 2)).astype(np.float32)))
    write("interpret/kv_t4_d2.npy", npy_bytes(values("half_minus_3", (4, 2)).astype(np.float32)))


def make_malformed() -> None:
    good = npy_bytes(values("half_minus_3", (3, 4)).astype("<f4"))
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"
    data = values("half_minus_3", (3, 4)).astype("<f4").tobytes()
    cases = {
        # .npy
        "npy_bad_magic.npy": b"\x93NUMPX" + good[6:],
        "npy_png_renamed.npy": b"\x89PNG\r\n\x1a\n" + b"\x00" * 40,
        "npy_truncated_magic.npy": good[:5],
        "npy_bad_version.npy": good[:6] + b"\x04\x00" + good[8:],
        "npy_truncated_header.npy": good[:60],
        "npy_header_syntax.npy": raw_npy(hdr.replace("'descr':", "'descr'"), data),
        "npy_missing_shape.npy": raw_npy("{'descr': '<f4', 'fortran_order': False, }", data),
        "npy_extra_key.npy": raw_npy(hdr[:-1] + "'extra': 1, }", data),
        "npy_duplicate_key.npy": raw_npy(hdr[:-1] + "'descr': '<f4', }", data),
        "npy_complex64.npy": npy_bytes(np.zeros(3, dtype=np.complex64)),
        "npy_unicode.npy": npy_bytes(np.array(["ab", "cd"])),
        "npy_structured.npy": npy_bytes(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])),
        "npy_float128_descr.npy": raw_npy("{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", b"\x00" * 16),
        "npy_fortran_not_bool.npy": raw_npy(hdr.replace("False", "0"), data),
        "npy_shape_list.npy": raw_npy(hdr.replace("(3, 4)", "[3, 4]"), data),
        "npy_shape_negative.npy": raw_npy(hdr.replace("(3, 4)", "(-3, 4)"), data),
        "npy_shape_int_overflow.npy": raw_npy(hdr.replace("(3, 4)", "(99999999999999999999999,)"), data),
        "npy_rank5.npy": npy_bytes(np.zeros((1, 1, 1, 1, 2), dtype=np.float32)),
        "npy_huge_shape.npy": raw_npy(hdr.replace("(3, 4)", "(100000, 100000, 100000)"), data),
        "npy_data_short.npy": good[:-4],
        "npy_data_long.npy": good + b"\x00" * 4,
        "npy_nan.npy": npy_bytes(np.array([[0.5, np.nan], [1.0, 2.0]], dtype=np.float32)),
        "npy_f64_beyond_f32.npy": npy_bytes(np.array([1.0, 1e300])),
        "npy_empty_axis.npy": npy_bytes(np.zeros((0, 4), dtype=np.float32)),
        "npy_v3_bad_utf8.npy": raw_npy(hdr, data, version=3)[:12] + b"\xff" + raw_npy(hdr, data, version=3)[13:],
        "npy_unterminated_string.npy": raw_npy("{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4), }", data),
        # .safetensors
        "st_too_short.safetensors": b"\x10\x00\x00",
        "st_header_beyond_file.safetensors": raw_safetensors('{"a":{}}', length=4096),
        "st_bad_json.safetensors": raw_safetensors('{"a": {"dtype": "F32",'),
        "st_header_not_utf8.safetensors": raw_safetensors(b'{"\xff":1}'),
        "st_overlap.safetensors": raw_safetensors(
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\x00" * 12),
        "st_gap.safetensors": raw_safetensors(
            {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
             "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\x00" * 12),
        "st_offsets_beyond_data.safetensors": raw_safetensors(
            {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\x00" * 8),
        "st_offsets_reversed.safetensors": raw_safetensors(
            {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\x00" * 4),
        "st_size_mismatch.safetensors": raw_safetensors(
            {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\x00" * 8),
        "st_unknown_dtype.safetensors": raw_safetensors(
            {"a": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}}, b"\x00" * 4),
        "st_missing_offsets.safetensors": raw_safetensors({"a": {"dtype": "F32", "shape": [1]}}, b"\x00" * 4),
        "st_duplicate_name.safetensors": raw_safetensors(
            '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\x00" * 8),
        "st_bad_metadata.safetensors": raw_safetensors(
            {"__metadata__": {"n": 1}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
            b"\x00" * 4),
        "st_only_ints.safetensors": capture_kv.safetensors_bytes(
            {"ids": np.arange(4, dtype=np.int64), "mask": np.ones(4, dtype=np.uint8)}),
        "st_nan.safetensors": capture_kv.safetensors_bytes(
            {"a": np.array([0.0, np.inf], dtype=np.float32)}),
        # delimited text
        "csv_latin1.csv": "tok,poids\n0.5,caf\xe9\n".encode("latin-1"),
        "csv_utf16.csv": "0.5,0.5\n".encode("utf-16"),
        "csv_ragged.csv": b"0.1,0.2,0.3\n0.4,0.5\n",
        "csv_nan.csv": b"a,b\n0.5,0.5\n0.25,NaN\n",
        "csv_inf.tsv": b"1\t2\n3\tinf\n",
        "csv_text_cell.csv": b"1,2\n3,four\n",
        "csv_decimal_comma.csv": b"0,5;0,5\n",
        "csv_header_only.csv": b"t0,t1,t2\n",
        # json
        "json_ragged.json": b"[[1, 2, 3], [4, 5]]",
        "json_syntax.json": b"[[1, 2], [3, 4]",
        "json_string_leaf.json": b'[[1, "2"], [3, 4]]',
        "json_rank5.json": b"[[[[[1]]]]]",
        "json_shape_mismatch.json": b'{"shape": [2, 3], "data": [1, 2, 3, 4, 5]}',
        "json_missing_data.json": b'{"shape": [2, 3]}',
        "json_huge_shape.json": b'{"shape": [100000, 100000, 100000], "data": [1]}',
        "json_beyond_f32.json": b"[1.0, 1e39]",
        "json_scalar.json": b"5",
        # any format
        "empty.npy": b"",
        "unknown_format.bin": b"hello, world",
    }
    for name, data in cases.items():
        write(f"malformed/{name}", data)


def main() -> int:
    for sub in ("npy", "safetensors", "text", "capture", "interpret"):
        shutil.rmtree(ROOT / sub, ignore_errors=True)
    # malformed/ also holds fuzz regressions (malformed/fuzz-*): keep those.
    for p in (ROOT / "malformed").glob("*"):
        if not p.name.startswith("fuzz-"):
            p.unlink()
    manifest: list = []
    make_npy(manifest)
    make_safetensors(manifest)
    make_text(manifest)
    make_capture(manifest)
    make_interpret()
    make_malformed()
    (ROOT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in ROOT.rglob("*") if p.is_file())
    count = sum(1 for p in ROOT.rglob("*") if p.is_file())
    print(f"wrote {count} files, {total} bytes, under {ROOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
