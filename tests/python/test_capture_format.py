"""Offline tests of scripts/capture_kv.py's file-writing half (no torch, no download).

Fakes a causal LM's outputs with numpy (per-layer [B, H, T, T] softmax attention and a K/V cache
in each of transformers' layouts) and checks that the files written are what kvlab reads:
.npy files numpy loads back with the documented shapes, and a .safetensors file whose header
tiles the data section exactly, with the same values.

Run with ``python3 -m pytest tests/python`` or ``python3 tests/python/test_capture_format.py``.
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import capture_kv  # noqa: E402
import make_fixtures  # noqa: E402

LAYERS, HEADS, KV_HEADS, T, D = 3, 4, 2, 7, 8


def fake_outputs():
    attentions, cache = make_fixtures.fake_model_outputs(
        seed=1, layers=LAYERS, heads=HEADS, kv_heads=KV_HEADS, tokens=T, dim=D)
    return attentions, cache


def header_of(path: Path) -> dict:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, "header is padded to 8 bytes"
    assert 8 + n <= len(data)
    return json.loads(data[8:8 + n])


def test_all_heads_shapes_and_values():
    attentions, cache = fake_outputs()
    with tempfile.TemporaryDirectory() as tmp:
        paths = capture_kv.save_capture(Path(tmp) / "cap", attentions, cache, layer=2)
        attn = np.load(paths["attention"])
        k, v = np.load(paths["k"]), np.load(paths["v"])
        assert attn.shape == (HEADS, T, T) and attn.dtype == np.float32
        assert k.shape == (KV_HEADS, T, D) and v.shape == (KV_HEADS, T, D)
        np.testing.assert_array_equal(attn, attentions[2][0])
        np.testing.assert_array_equal(k, cache[2][0][0])
        np.testing.assert_array_equal(v, cache[2][1][0])
        # Rows are distributions and causal: what kvlab's interpret_attention accepts.
        np.testing.assert_allclose(attn.sum(axis=-1), 1.0, rtol=1e-5)
        assert np.all(np.triu(attn, k=1) == 0)
        st = capture_kv.read_safetensors(paths["safetensors"])
        for role, arr in (("attention", attn), ("k", k), ("v", v)):
            np.testing.assert_array_equal(st[role], arr)
        header = header_of(paths["safetensors"])
        assert header["__metadata__"] == {"layer": "2", "head": "all"}
        assert header["attention"]["dtype"] == "F32"
        assert header["attention"]["shape"] == [HEADS, T, T]


def test_one_head_float16_maps_gqa_head():
    attentions, cache = fake_outputs()
    with tempfile.TemporaryDirectory() as tmp:
        paths = capture_kv.save_capture(Path(tmp) / "sub" / "cap", attentions, cache, layer=0,
                                        head=3, dtype="float16")
        attn = np.load(paths["attention"])
        k = np.load(paths["k"])
        assert attn.shape == (T, T) and attn.dtype == np.float16
        assert k.shape == (T, D) and k.dtype == np.float16
        # Query head 3 of 4 reads KV head 3 * 2 // 4 = 1.
        np.testing.assert_array_equal(k, cache[0][0][0, 1].astype(np.float16))
        assert header_of(paths["safetensors"])["k"]["dtype"] == "F16"


def test_cache_layouts():
    _, cache = fake_outputs()
    legacy = cache
    dynamic = SimpleNamespace(key_cache=[c[0] for c in cache], value_cache=[c[1] for c in cache])
    layered = SimpleNamespace(layers=[SimpleNamespace(keys=c[0], values=c[1]) for c in cache])
    for layout in (legacy, dynamic, layered):
        k, v = capture_kv.kv_arrays(layout, 1)
        np.testing.assert_array_equal(k, cache[1][0][0])
        np.testing.assert_array_equal(v, cache[1][1][0])


def test_bad_requests_are_refused():
    attentions, cache = fake_outputs()
    for kwargs, words in (({"layer": LAYERS}, "layer 3 is out of range"),
                          ({"layer": 0, "head": HEADS}, "head 4 is out of range"),
                          ({"layer": 0, "dtype": "int8"}, "dtype")):
        try:
            with tempfile.TemporaryDirectory() as tmp:
                capture_kv.save_capture(Path(tmp) / "x", attentions, cache, **kwargs)
        except ValueError as e:
            assert words in str(e), str(e)
        else:
            raise AssertionError(f"{kwargs} was accepted")


def test_safetensors_layout_and_bf16():
    tensors = {"a": np.arange(3, dtype=">f4"), "b": capture_kv.BF16(np.array([1.5, -2.0])),
               "c": np.ones((2, 2), dtype=np.int64)}
    data = capture_kv.safetensors_bytes(tensors)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert header["a"] == {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}
    assert header["b"] == {"dtype": "BF16", "shape": [2], "data_offsets": [12, 16]}
    assert header["c"]["data_offsets"] == [16, 48]
    assert len(data) == 8 + n + 48
    # Big-endian input is stored little-endian.
    assert data[8 + n:8 + n + 12] == np.arange(3, dtype="<f4").tobytes()
    with tempfile.TemporaryDirectory() as tmp:
        p = capture_kv.save_safetensors(Path(tmp) / "t.safetensors", tensors)
        back = capture_kv.read_safetensors(p)
    np.testing.assert_array_equal(back["b"], [1.5, -2.0])


def test_tokens_json_and_metadata():
    attentions, cache = fake_outputs()
    texts = ["<s>", " The", " cat", "\n", " 猫", " sat", "."]
    with tempfile.TemporaryDirectory() as tmp:
        paths = capture_kv.save_capture(Path(tmp) / "cap", attentions, cache, layer=0,
                                        tokens=texts)
        assert json.loads(paths["tokens"].read_text(encoding="utf-8")) == texts
        meta = header_of(paths["safetensors"])["__metadata__"]
        assert json.loads(meta["tokens"]) == texts, "the same list, as JSON text"
        try:
            capture_kv.save_capture(Path(tmp) / "bad", attentions, cache, layer=0, tokens=texts[:3])
        except ValueError as e:
            assert "3 token texts for T=7" in str(e)
        else:
            raise AssertionError("a list of the wrong length is refused")


def test_committed_capture_fixtures_are_current():
    """tests/fixtures/capture was written by this code (re-run make_fixtures.py if not)."""
    attentions, cache = make_fixtures.fake_model_outputs()
    root = Path(__file__).resolve().parents[1] / "fixtures" / "capture"
    with tempfile.TemporaryDirectory() as tmp:
        paths = capture_kv.save_capture(Path(tmp) / "all_heads", attentions, cache, layer=1,
                                        metadata={"model": "fake"})
        for p in paths.values():
            assert p.read_bytes() == (root / p.name).read_bytes(), p.name


if __name__ == "__main__":
    tests = [f for name, f in sorted(globals().items()) if name.startswith("test_")]
    for t in tests:
        t()
        print(f"ok {t.__name__}")
    print(f"{len(tests)} passed, 0 failed")
