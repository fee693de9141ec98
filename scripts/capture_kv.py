#!/usr/bin/env python3
"""Capture attention and K/V from a Hugging Face causal LM, in files kvlab reads.

Runs one forward pass over a prompt with ``output_attentions=True`` and ``use_cache=True`` and
saves, for one layer (and optionally one head):

    <out>_attention.npy   [H, T, T]  (or [T, T] with --head): the full causal attention matrix;
                          its last rows are SnapKV's observation window
    <out>_k.npy           [H_kv, T, d] (or [T, d] with --head): the layer's keys
    <out>_v.npy           [H_kv, T, d] (or [T, d] with --head): the layer's values
    <out>_tokens.json     the prompt's tokens as text, one per token (a JSON list of strings)
    <out>.safetensors     the same three tensors, named "attention", "k" and "v"; the tokens'
                          texts in its metadata, entry "tokens" (a JSON list as text)

kvlab shows the tokens' text in the selection charts and the kept-token list when the tokens
file is uploaded with the tensors (the safetensors file carries them itself).

With grouped-query attention (H_kv < H), --head h picks query head h for the attention and the KV
head it reads, h * H_kv // H.

Examples::

    python3 scripts/capture_kv.py --model gpt2 --prompt "The cat sat on the mat." --layer 5
    python3 scripts/capture_kv.py --model gpt2 --prompt "..." --layer 5 --head 3 --dtype float16
    python3 scripts/capture_kv.py --tiny-random --prompt "hello world"   # no download

Needs ``torch`` and ``transformers`` only for the forward pass (``run_model``). Everything else in
this file (picking the layer / head, writing .npy and .safetensors) is plain numpy and is tested
offline by tests/python/test_capture_format.py; scripts/make_fixtures.py uses it to write the
capture fixtures that the Rust tests load.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

# numpy dtype -> safetensors dtype name.
_ST_DTYPES = {
    np.dtype("bool"): "BOOL",
    np.dtype("uint8"): "U8",
    np.dtype("int8"): "I8",
    np.dtype("int16"): "I16",
    np.dtype("uint16"): "U16",
    np.dtype("float16"): "F16",
    np.dtype("int32"): "I32",
    np.dtype("uint32"): "U32",
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("int64"): "I64",
    np.dtype("uint64"): "U64",
}
_ST_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4,
             "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}

SAVE_DTYPES = ("float32", "float16")


class BF16:
    """A float array to be stored as bfloat16 (numpy has no bfloat16 dtype).

    ``bits`` holds the upper 16 bits of each float32, rounded to nearest even.
    """

    def __init__(self, values: Any):
        f = np.ascontiguousarray(values, dtype=np.float32)
        u = f.view(np.uint32).astype(np.uint64)
        rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        self.bits = rounded.astype(np.uint16)
        self.shape = f.shape


def to_numpy(x: Any) -> np.ndarray:
    """A torch tensor (any dtype, any device) or array-like as a float32 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach()
        if hasattr(x, "float"):
            x = x.float()
        if hasattr(x, "cpu"):
            x = x.cpu()
        x = x.numpy()
    return np.asarray(x, dtype=np.float32)


def _check_index(name: str, index: int, length: int) -> None:
    if not 0 <= index < length:
        raise ValueError(f"{name} {index} is out of range: must be in 0..={length - 1} ({length} {name}s)")


def attention_array(attentions: Sequence[Any], layer: int, head: int | None = None,
                    batch: int = 0) -> np.ndarray:
    """One layer's attention as kvlab reads it.

    ``attentions`` is the model output's per-layer sequence of ``[B, H, S, T]`` arrays. Returns
    ``[H, S, T]`` (all heads) or ``[S, T]`` (``head`` given), float32, C order.
    """
    _check_index("layer", layer, len(attentions))
    a = to_numpy(attentions[layer])
    if a.ndim != 4:
        raise ValueError(f"attention of layer {layer} has shape {a.shape}: expected [B, H, S, T]")
    _check_index("batch item", batch, a.shape[0])
    a = a[batch]
    if head is not None:
        _check_index("head", head, a.shape[0])
        a = a[head]
    return np.ascontiguousarray(a, dtype=np.float32)


def cache_layer(past_key_values: Any, layer: int) -> tuple[Any, Any]:
    """``(K, V)`` of one layer from any of transformers' cache layouts.

    Accepts a legacy tuple of ``(k, v)`` pairs, a ``DynamicCache`` with ``key_cache`` /
    ``value_cache`` lists, or a newer cache with ``layers[i].keys`` / ``.values``.
    """
    if hasattr(past_key_values, "layers") and not isinstance(past_key_values, (list, tuple)):
        layers = past_key_values.layers
        _check_index("layer", layer, len(layers))
        return layers[layer].keys, layers[layer].values
    if hasattr(past_key_values, "key_cache"):
        _check_index("layer", layer, len(past_key_values.key_cache))
        return past_key_values.key_cache[layer], past_key_values.value_cache[layer]
    if hasattr(past_key_values, "to_legacy_cache"):
        past_key_values = past_key_values.to_legacy_cache()
    _check_index("layer", layer, len(past_key_values))
    k, v = past_key_values[layer][0], past_key_values[layer][1]
    return k, v


def kv_arrays(past_key_values: Any, layer: int, head: int | None = None,
              n_heads: int | None = None, batch: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One layer's keys and values as kvlab reads them: ``[H_kv, T, d]`` each, or ``[T, d]``.

    ``head`` is a query head; with grouped-query attention (``H_kv < n_heads``) the KV head used
    is ``head * H_kv // n_heads``.
    """
    k, v = (to_numpy(x) for x in cache_layer(past_key_values, layer))
    if k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"K/V of layer {layer} have shapes {k.shape}, {v.shape}: expected [B, H_kv, T, d]")
    _check_index("batch item", batch, k.shape[0])
    k, v = k[batch], v[batch]
    if head is not None:
        kv_heads = k.shape[0]
        total = n_heads if n_heads is not None else kv_heads
        _check_index("head", head, total)
        kv_head = head * kv_heads // total
        k, v = k[kv_head], v[kv_head]
    return np.ascontiguousarray(k), np.ascontiguousarray(v)


def safetensors_bytes(tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a .safetensors file holding ``tensors`` (numpy arrays or :class:`BF16`).

    Layout: 8-byte little-endian header length, a JSON header padded with spaces to a multiple of
    8, then each tensor's little-endian C-order bytes, in the given order, with no gaps.
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        if isinstance(value, BF16):
            dtype, shape, raw = "BF16", list(value.shape), value.bits.astype("<u2").tobytes()
        else:
            arr = np.asarray(value)
            native = arr.dtype.newbyteorder("=")
            if native not in _ST_DTYPES:
                raise ValueError(f"tensor {name!r}: dtype {arr.dtype} has no safetensors name")
            dtype = _ST_DTYPES[native]
            shape = list(arr.shape)
            raw = np.ascontiguousarray(arr, dtype=native.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def save_safetensors(path: str | Path, tensors: dict[str, Any],
                     metadata: dict[str, str] | None = None) -> Path:
    """Writes :func:`safetensors_bytes` to ``path``."""
    path = Path(path)
    path.write_bytes(safetensors_bytes(tensors, metadata))
    return path


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Reads a .safetensors file written with numpy dtypes (BF16 comes back as float32).

    Strict like kvlab: offsets must tile the data section exactly.
    """
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    header.pop("__metadata__", None)
    out = {}
    cursor = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, end = info["data_offsets"]
        if begin != cursor:
            raise ValueError(f"tensor {name!r} starts at {begin}, expected {cursor}")
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != count * _ST_SIZES[info["dtype"]]:
            raise ValueError(f"tensor {name!r} spans {end - begin} bytes")
        raw = body[begin:end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            inv = {v: k for k, v in _ST_DTYPES.items()}
            arr = np.frombuffer(raw, dtype=inv[info["dtype"]].newbyteorder("<"))
        out[name] = arr.reshape(info["shape"])
        cursor = end
    if cursor != len(body):
        raise ValueError(f"data section has {len(body)} bytes, tensors cover {cursor}")
    return out


def save_capture(out: str | Path, attentions: Sequence[Any], past_key_values: Any, layer: int,
                 head: int | None = None, dtype: str = "float32",
                 metadata: dict[str, str] | None = None,
                 tokens: Sequence[str] | None = None) -> dict[str, Path]:
    """Saves one layer's attention and K/V as .npy files and one .safetensors file.

    ``out`` is a path prefix: writes ``<out>_attention.npy``, ``<out>_k.npy``, ``<out>_v.npy`` and
    ``<out>.safetensors``; with ``tokens`` (one text per token) also ``<out>_tokens.json`` and the
    safetensors metadata entry ``tokens``. ``dtype`` is ``float32`` or ``float16``. Returns the
    paths by role.
    """
    if dtype not in SAVE_DTYPES:
        raise ValueError(f"dtype {dtype!r}: expected one of {SAVE_DTYPES}")
    n_heads = to_numpy(attentions[layer]).shape[1] if len(attentions) > layer >= 0 else None
    attn = attention_array(attentions, layer, head)
    k, v = kv_arrays(past_key_values, layer, head, n_heads)
    if attn.shape[-1] != k.shape[-2]:
        raise ValueError(f"attention covers T={attn.shape[-1]} tokens but K has T={k.shape[-2]}")
    if tokens is not None and len(tokens) != attn.shape[-1]:
        raise ValueError(f"{len(tokens)} token texts for T={attn.shape[-1]} tokens")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"attention": attn.astype(dtype), "k": k.astype(dtype), "v": v.astype(dtype)}
    paths = {}
    for role, arr in arrays.items():
        p = out.parent / f"{out.name}_{role}.npy"
        np.save(p, np.ascontiguousarray(arr), allow_pickle=False)
        paths[role] = p
    meta = {"layer": str(layer), "head": "all" if head is None else str(head)}
    meta.update(metadata or {})
    if tokens is not None:
        texts = json.dumps([str(t) for t in tokens], ensure_ascii=False)
        meta["tokens"] = texts
        paths["tokens"] = out.parent / f"{out.name}_tokens.json"
        paths["tokens"].write_text(texts, encoding="utf-8")
    paths["safetensors"] = save_safetensors(out.parent / f"{out.name}.safetensors", arrays, meta)
    return paths


def describe(paths: dict[str, Path]) -> str:
    """One line per saved .npy file: role, shape and dtype."""
    lines = []
    for role in ("attention", "k", "v"):
        arr = np.load(paths[role], allow_pickle=False)
        lines.append(f"{role:9s} {str(list(arr.shape)):18s} {arr.dtype}  {paths[role]}")
    if "tokens" in paths:
        count = len(json.loads(paths["tokens"].read_text(encoding="utf-8")))
        lines.append(f"{'tokens':9s} {str([count]):18s} {'text':7s}  {paths['tokens']}")
    lines.append(f"{'all':9s} {'':18s} {'':7s}  {paths['safetensors']}")
    return "\n".join(lines)


def run_model(model_name: str | None, prompt: str, tiny_random: bool = False,
              device: str = "cpu") -> tuple[list[np.ndarray], Any, list[str]]:
    """Runs the model once over ``prompt``; returns (attentions as numpy, past_key_values, the
    tokens' texts).

    ``tiny_random`` builds a 2-layer randomly initialised Llama from a config (no download) and
    feeds it byte-level token ids, for testing this script without a network.
    """
    import torch  # noqa: PLC0415 (only the forward pass needs torch)
    import transformers  # noqa: PLC0415

    torch.manual_seed(0)
    if tiny_random:
        config = transformers.LlamaConfig(
            vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
        config._attn_implementation = "eager"
        model = transformers.LlamaForCausalLM(config)
        ids = torch.tensor([list(prompt.encode("utf-8"))[:512] or [0]])
        inputs = {"input_ids": ids}
        # (one byte a token: its character, or its value where it is part of a longer one)
        texts = [chr(b) if b < 128 else f"\\x{b:02x}" for b in ids[0].tolist()]
    else:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_name)
        # Eager attention: fused kernels (sdpa, flash) do not return attention weights.
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_name, attn_implementation="eager")
        inputs = dict(tokenizer(prompt, return_tensors="pt"))
        texts = [tokenizer.decode([i]) for i in inputs["input_ids"][0].tolist()]
    model.to(device).eval()
    with torch.no_grad():
        outputs = model(**{k: v.to(device) for k, v in inputs.items()},
                        output_attentions=True, use_cache=True)
    return [to_numpy(a) for a in outputs.attentions], outputs.past_key_values, texts


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="Hugging Face model name, e.g. gpt2")
    parser.add_argument("--tiny-random", action="store_true",
                        help="use a tiny randomly initialised Llama (no download)")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--layer", type=int, default=0, help="layer index, from 0 (default 0)")
    parser.add_argument("--head", type=int, default=None,
                        help="query head, from 0 (default: all heads, [H, T, T] and [H_kv, T, d])")
    parser.add_argument("--dtype", choices=SAVE_DTYPES, default="float32")
    parser.add_argument("--out", default="capture", help="output path prefix (default: capture)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if not args.model and not args.tiny_random:
        parser.error("give --model NAME or --tiny-random")
    attentions, pkv, texts = run_model(args.model, args.prompt, args.tiny_random, args.device)
    paths = save_capture(args.out, attentions, pkv, args.layer, args.head, args.dtype,
                         {"model": args.model or "tiny-random-llama", "prompt": args.prompt},
                         tokens=texts)
    print(describe(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
