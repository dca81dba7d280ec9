"""Leaves torch.compile's generated code for the decode product at m = 1 and 8 against a
28672 x 8192 bf16 weight and for SwiGLU / GeGLU (tanh) at 4096 x 14336 bf16, where torch.compile
led gpukern (`bench/experiments/third-wave/5558695-gemm.jsonl`, `eec2828-glu.jsonl`). Run with
`TORCH_LOGS=output_code TORCHINDUCTOR_CACHE_DIR=/tmp/ind TRITON_CACHE_DIR=/tmp/tri`: the
generated Triton code goes to stderr, the launch configurations to `/tmp/ind/**/*.best_config`.
A diagnostic, not a benchmark: its times are a plain loop of events, not bench/peers.py's method.
"""
import torch

from inductor_dump import bench

F = torch.nn.functional


def main():
    w = torch.randn(28672, 8192, device="cuda", dtype=torch.bfloat16)
    mm = torch.compile(lambda x, w: torch.matmul(x, w.T), dynamic=False)
    for m in (1, 8):
        x = torch.randn(m, 8192, device="cuda", dtype=torch.bfloat16)
        ms = bench(mm, x, w)
        print(f"decode m={m}: {ms * 1e3:.1f} us {2 * w.numel() / ms / 1e6:.0f} GB/s", flush=True)
    del w
    x = torch.randn(4096, 2 * 14336, device="cuda", dtype=torch.bfloat16)
    for name, act in (("swiglu", F.silu), ("geglu", lambda g: F.gelu(g, approximate="tanh"))):
        fn = torch.compile(lambda x, act=act: act(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1], dynamic=False)
        ms = bench(fn, x)
        print(f"{name} 4096x14336: {ms * 1e3:.1f} us {3 * x.numel() / ms / 1e6:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
