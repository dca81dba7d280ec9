"""The peer of examples/llama.rs: the same Llama-style decoder in torch, from the same safetensors
file (Hugging Face's `LlamaForCausalLM` names, written by `llama --write-weights`), in bf16:

* timing: the prefill of 4096 tokens at batch 1 and the decode of batch 1 and 8 at context 4096,
  eager (`torch`) and through `torch.compile(mode="reduce-overhead")` (`torch-compile`: CUDA
  graphs; the decode on a static KV cache of the whole context with a position mask, as
  gpt-fast does, so that one graph serves every step; the decode attention as grouped
  products that read K and V once, `Llama.decode_attention`). Records `decoder_prefill` and
  `decoder_decode` with `tokens_per_s`, the shapes as the example writes them
  (`<config>:b<batch>:p<prompt>`). Like for like with the example: a prefill runs from the
  prompt's ids on the device to the first greedy tokens on the host (the LM head on the last
  position only); a decode step from the step's input tokens to the next ones on the host.
* `--check`: correctness against gpukern. Runs the example (`--example PATH`) with
  `--dump-logits` on the same weights and prompt (or reads a dump given by `--logits`), then
  the torch model teacher-forced on the prompt and gpukern's tokens, and compares every step's
  logits and greedy tokens (see `check` for the tolerance).

No dependency beyond torch: the safetensors file is read here (8-byte header length, JSON
header, raw little-endian tensors).

Run on the GPU machine:
  python3 bench/peers_llama.py --weights W.safetensors --out bench/experiments/llama/peers.jsonl
  python3 bench/peers_llama.py --weights W.safetensors --check --example target/release/examples/llama
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time
from typing import Any

import peers_common as C

PREFILL = [(1, 4096)]
DECODE = [(1, 4096), (8, 4096)]
# Decode steps timed per shape (after warm-up steps that also capture the compiled graphs).
DECODE_STEPS = 32
WARMUP_STEPS = 4
PREFILL_REPS = 5


def read_safetensors(torch: Any, path: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Every tensor of the file (bf16, on the GPU) and the file's metadata."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        if info["dtype"] != "BF16":
            raise ValueError(f"{path}: {name} is {info['dtype']}, expected BF16")
        start, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[start:end]), dtype=torch.bfloat16).reshape(info["shape"])
        out[name] = t.cuda()
    return out, meta


class Llama:
    """The decoder in torch, Hugging Face's numerics in bf16: RMSNorm in f32 then the weight in
    bf16, RoPE half-split (`rotate_half`), SDPA with GQA, `silu(gate) * up`."""

    def __init__(self, torch: Any, w: dict[str, Any], meta: dict[str, str]) -> None:
        self.torch = torch
        self.w = w
        self.hidden = int(meta["hidden"])
        self.heads = int(meta["heads"])
        self.kv_heads = int(meta["kv_heads"])
        self.d = int(meta["head_dim"])
        self.layers = int(meta["layers"])
        self.vocab = int(meta["vocab"])
        self.eps = float(meta["eps"])
        theta = float(meta["rope_theta"])
        i = torch.arange(0, self.d, 2, dtype=torch.float64, device="cuda")
        self.inv_freq = (theta ** (-i / self.d)).float()

    def norm(self, x: Any, weight: Any) -> Any:
        xf = x.float()
        xf = xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * xf.to(self.torch.bfloat16)

    def rope(self, x: Any, pos: Any) -> Any:
        """x [B, H, S, D] at positions pos [B, S]."""
        torch = self.torch
        angle = pos.float()[..., None] * self.inv_freq  # [B, S, D/2]
        angle = torch.cat([angle, angle], dim=-1)[:, None]
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        half = self.d // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, ids: Any, pos: Any, cache: list[tuple[Any, Any]], mask: Any | None, start: Any | None) -> Any:
        """Logits (f32) of the last position of each row of `ids` [B, S] at positions `pos`.

        With `start` None (prefill from position 0): causal attention over the tokens
        themselves, written to the cache's first S positions. Otherwise (decode, S == 1): the
        token's K and V written at `start` (a tensor, for CUDA graphs) and attention over the
        whole static cache under `mask` [B, 1, 1, ctx]."""
        F, w = self.torch.nn.functional, self.w
        b, s = ids.shape
        h = F.embedding(ids, w["model.embed_tokens.weight"])
        for i in range(self.layers):
            p = f"model.layers.{i}"
            x = self.norm(h, w[f"{p}.input_layernorm.weight"])
            q = (x @ w[f"{p}.self_attn.q_proj.weight"].T).view(b, s, self.heads, self.d).transpose(1, 2)
            k = (x @ w[f"{p}.self_attn.k_proj.weight"].T).view(b, s, self.kv_heads, self.d).transpose(1, 2)
            v = (x @ w[f"{p}.self_attn.v_proj.weight"].T).view(b, s, self.kv_heads, self.d).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            kc, vc = cache[i]
            if start is None:
                kc[:, :, :s] = k
                vc[:, :, :s] = v
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                kc.index_copy_(2, start, k)
                vc.index_copy_(2, start, v)
                o = self.decode_attention(q, kc, vc, mask)
            o = o.transpose(1, 2).reshape(b, s, self.heads * self.d)
            h = h + o @ w[f"{p}.self_attn.o_proj.weight"].T
            x = self.norm(h, w[f"{p}.post_attention_layernorm.weight"])
            gate = x @ w[f"{p}.mlp.gate_proj.weight"].T
            up = x @ w[f"{p}.mlp.up_proj.weight"].T
            h = h + (F.silu(gate) * up) @ w[f"{p}.mlp.down_proj.weight"].T
        x = self.norm(h[:, -1], w["model.norm.weight"])
        return (x @ w["lm_head.weight"].T).float()

    def decode_attention(self, q: Any, kc: Any, vc: Any, mask: Any) -> Any:
        """One query per sequence over the static cache, grouped-query: each kv head's G query
        heads as the rows of one product, so K and V are read once (SDPA with a mask and
        `enable_gqa` falls back to the math kernel, which repeats K and V per query head, and
        `repeat_interleave` before SDPA, gpt-fast's way, writes the cache G times over).
        q [B, H, 1, D], kc and vc [B, KVH, ctx, D], mask [1, 1, 1, ctx] (True: attend)."""
        b, h, s, d = q.shape
        kv = kc.shape[1]
        qg = q.reshape(b, kv, (h // kv) * s, d)
        scores = (qg @ kc.transpose(-1, -2)).float() * d**-0.5
        scores = scores.masked_fill(~mask[0], float("-inf"))
        p = scores.softmax(-1).to(q.dtype)
        return (p @ vc).reshape(b, h, s, d)

    def cache(self, batch: int, context: int) -> list[tuple[Any, Any]]:
        shape = (batch, self.kv_heads, context, self.d)
        z = self.torch.zeros
        return [(z(shape, dtype=self.torch.bfloat16, device="cuda"), z(shape, dtype=self.torch.bfloat16, device="cuda")) for _ in range(self.layers)]


def prompt(seed: int, batch: int, length: int, vocab: int) -> list[list[int]]:
    """The example's prompts (examples/llama/output.rs: a 64-bit LCG from the seed)."""
    x = (seed ^ 0x7072_6F6D_7074) & (2**64 - 1)
    out = []
    for _ in range(batch):
        row = []
        for _ in range(length):
            x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
            row.append((x >> 33) % vocab)
        out.append(row)
    return out


def modules(torch: Any, m: Llama) -> tuple[Any, Any]:
    """The prefill and the decode step as `nn.Module`s whose KV caches are registered buffers:
    what `torch.compile(mode="reduce-overhead")` captures in CUDA graphs with the caches at
    fixed addresses, mutated in place (gpt-fast's layout)."""

    class Caches(torch.nn.Module):
        def __init__(self, batch: int, context: int) -> None:
            super().__init__()
            self.context = context
            for i, (k, v) in enumerate(m.cache(batch, context)):
                self.register_buffer(f"k{i}", k)
                self.register_buffer(f"v{i}", v)

        def pairs(self) -> list[tuple[Any, Any]]:
            return [(getattr(self, f"k{i}"), getattr(self, f"v{i}")) for i in range(m.layers)]

    class Prefill(Caches):
        def forward(self, ids: Any, pos: Any) -> Any:
            return m.forward(ids, pos, self.pairs(), None, None).argmax(-1)

    class Step(Caches):
        def forward(self, tokens: Any, start: Any) -> Any:
            b = tokens.shape[0]
            pos = start.expand(b, 1)
            mask = (torch.arange(self.context, device="cuda") <= start)[None, None, None, :]
            return m.forward(tokens, pos, self.pairs(), mask, start).argmax(-1)

    return Prefill, Step


def time_model(torch: Any, m: Llama, config: str, compiled: bool, sink: C.Sink, cases: set[str]) -> None:
    impl = "torch-compile" if compiled else "torch"
    Prefill, Step = modules(torch, m)
    meta = {"version": torch.__version__, "timer": "wall_clock"}
    for batch, length in PREFILL:
        if f"prefill{batch}" not in cases:
            continue
        shape = f"{config}:b{batch}:p{length}"
        base = C.record("decoder_prefill", impl, shape, dtype="bf16", config=config, batch=batch, prompt_len=length, **meta)

        def prefill(batch: int = batch, length: int = length, base: dict[str, Any] = base) -> dict[str, Any]:
            ids = torch.tensor(prompt(0, batch, length, m.vocab), device="cuda")
            pos = torch.arange(length, device="cuda").expand(batch, length)
            module = Prefill(batch, length)
            fn = torch.compile(module, mode="reduce-overhead") if compiled else module
            times = []
            for rep in range(PREFILL_REPS + 2):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(ids, pos).tolist()
                if rep >= 2:
                    times.append((time.perf_counter() - t0) * 1e3)
            ms = statistics.median(times)
            return {**base, "median_ms": ms, "tokens_per_s": batch * length / (ms * 1e-3), "reps": len(times)}

        sink.item(base, prefill)
    for batch, length in DECODE:
        if f"decode{batch}" not in cases:
            continue
        shape = f"{config}:b{batch}:p{length}"
        base = C.record("decoder_decode", impl, shape, dtype="bf16", config=config, batch=batch, prompt_len=length, context=length, **meta)

        def decode(batch: int = batch, length: int = length, base: dict[str, Any] = base) -> dict[str, Any]:
            context = length + DECODE_STEPS + WARMUP_STEPS
            module = Step(batch, context)
            ids = torch.tensor(prompt(0, batch, length, m.vocab), device="cuda")
            pos = torch.arange(length, device="cuda").expand(batch, length)
            tokens = m.forward(ids, pos, module.pairs(), None, None).argmax(-1)[:, None]
            fn = torch.compile(module, mode="reduce-overhead") if compiled else module
            # The step's first tokens against the prefill path over the prompt and the token (a
            # check that the static-cache step computes the same model; near ties may differ).
            first = tokens
            ref = m.forward(torch.cat([ids, first], dim=1), torch.arange(length + 1, device="cuda").expand(batch, length + 1),
                            m.cache(batch, length + 1), None, None).argmax(-1).tolist()
            agree = None
            times = []
            for i in range(WARMUP_STEPS + DECODE_STEPS):
                # Timed as the example times its step: the inputs copied up, the step, the
                # tokens read back.
                t0 = time.perf_counter()
                start = torch.tensor([length + i], device="cuda")
                host = fn(tokens, start).tolist()
                tokens = torch.tensor(host, device="cuda")[:, None]
                if i == 0:
                    agree = sum(int(a == r) for a, r in zip(host, ref))
                if i >= WARMUP_STEPS:
                    times.append((time.perf_counter() - t0) * 1e3)
            ms = statistics.median(times)
            return {**base, "median_ms": ms, "tokens_per_s": batch / (ms * 1e-3), "reps": len(times),
                    "first_step_tokens_agree_with_prefill": f"{agree}/{batch}"}

        sink.item(base, decode)


def check(torch: Any, m: Llama, args: argparse.Namespace) -> int:
    """gpukern's logits and tokens against this model teacher-forced on the same tokens.

    Tolerance: the two sides round to bf16 at different points (torch: the norm before its
    weight, `silu(gate)` and the SDPA's probabilities; gpukern: once per fused op), R roundings
    on a token's path to its logits each of at most 2^-8 relative, propagated with a gain of
    about 1 (the weights are scaled for it): |error| <= R 2^-8 rms(logits), R = 12 per block + 2.
    Greedy tokens: gpukern's token must be torch's argmax, or within twice the largest measured
    logit error of it (a near tie)."""
    logits_path = args.logits
    if logits_path is None:
        logits_path = os.path.join(args.dump_dir, "llama-logits.npy")
        cmd = [args.example, "--config", args.config, "--weights", args.weights, "--batch", str(args.batch),
               "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens), "--reps", "1",
               "--dump-logits", logits_path]
        print("running", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    with open(logits_path + ".json", encoding="utf-8") as f:
        dumped = json.load(f)
    with open(logits_path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<H", raw[8:10])
    steps, batch, vocab = len(dumped["tokens"]), dumped["batch"], m.vocab
    got = torch.frombuffer(bytearray(raw[10 + hlen:]), dtype=torch.float32).reshape(steps, batch, vocab).cuda()
    prompt_ids = torch.tensor(dumped["prompt"], device="cuda")
    tokens = torch.tensor(dumped["tokens"], device="cuda").T  # [batch, steps]
    length = dumped["prompt_len"]
    cache = m.cache(batch, length + steps)
    want = []
    with torch.no_grad():
        pos = torch.arange(length, device="cuda").expand(batch, length)
        want.append(m.forward(prompt_ids, pos, cache, None, None))
        for s in range(1, steps):
            ids = torch.cat([prompt_ids, tokens[:, :s]], dim=1)
            pos = torch.arange(length + s, device="cuda").expand(batch, length + s)
            want.append(m.forward(ids, pos, m.cache(batch, length + s), None, None))
    want_t = torch.stack(want)
    err = (got - want_t).abs().max().item()
    rms = want_t.pow(2).mean().sqrt().item()
    r = 12 * m.layers + 2
    tol = r * 2.0**-8 * rms
    print(f"logits: largest error {err:.3e}, tolerance {tol:.3e} ({r} roundings x 2^-8 x rms {rms:.3f})")
    ok = math.isfinite(err) and err <= tol
    best = want_t.argmax(-1)  # [steps, batch]
    ours = tokens.T
    margin = want_t.gather(-1, best[..., None]) - want_t.gather(-1, ours[..., None])
    agree = (best == ours).sum().item()
    bad = (margin.squeeze(-1) > 2 * err).sum().item()
    print(f"greedy tokens: {agree} of {best.numel()} agree with torch's argmax; {bad} differ by more than twice the error")
    ok = ok and bad == 0
    print("check:", "pass" if ok else "FAIL")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True, help="safetensors file written by `llama --write-weights`")
    ap.add_argument("--out", default="bench/experiments/llama/peers.jsonl")
    ap.add_argument("--check", action="store_true", help="compare with gpukern's logits instead of timing")
    ap.add_argument("--example", default="target/release/examples/llama")
    ap.add_argument("--logits", help="a dump of `llama --dump-logits` to compare (instead of running the example)")
    ap.add_argument("--dump-dir", default="/tmp")
    ap.add_argument("--config", default="llama3-8b-4layer")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--modes", default="eager,compile", help="timing modes: eager, compile")
    ap.add_argument("--cases", default="prefill1,decode1,decode8",
                    help="timed cases: prefill1 (4096 tokens, batch 1), decode1, decode8 (context 4096)")
    args = ap.parse_args()
    import torch

    w, meta = read_safetensors(torch, args.weights)
    m = Llama(torch, w, meta)
    if args.check:
        return check(torch, m, args)
    sink = C.Sink(args.out, {"gpu": torch.cuda.get_device_name(), "driver": C.driver_version(), "git_rev": C.git_rev(),
                             "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, time.monotonic() + 3600)
    config = meta.get("config", "unknown")
    with torch.no_grad():
        cases = set(args.cases.split(","))
        for mode in args.modes.split(","):
            start = time.monotonic()
            time_model(torch, m, config, mode == "compile", sink, cases)
            print(f"{mode}: {time.monotonic() - start:.1f} s", file=sys.stderr)
    sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
