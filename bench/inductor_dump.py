"""Times torch.compile's kernels for the norm and softmax shapes where they led gpukern, and,
run with `TORCH_LOGS=output_code TORCHINDUCTOR_CACHE_DIR=/tmp/ind TRITON_CACHE_DIR=/tmp/tri`,
leaves the generated Triton code (stderr), each kernel's chosen launch configuration
(`/tmp/ind/**/*.best_config`) and its PTX (`/tmp/tri/**/*.ptx`) to read: how the evict-last
candidates of the norms and softmax were found (bench/experiments/h200-logs/inductor-*.log). A
diagnostic, not a benchmark: its timing is a plain loop of events, not bench/peers.py's method.
`--bf16`: the bf16 norms at 8192 x 1024 and 8192 x 16384 instead.
"""
import torch

F = torch.nn.functional
torch._dynamo.config.cache_size_limit = 64


def bench(fn, *args):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        fn(*args)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 20


def bf16_cases():
    """The bf16 norms where torch.compile led in run 988d91a."""
    cases = []
    for cols in (1024, 16384):
        x = torch.randn(8192, cols, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        rms = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6), dynamic=False)
        layer = torch.compile(lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-6), dynamic=False)
        cases.append((f"rms 8192x{cols} bf16", rms, (x, w), 4 * x.numel()))
        cases.append((f"layer 8192x{cols} bf16", layer, (x, w, b), 4 * x.numel()))
    return cases


def main():
    import sys

    if "--bf16" in sys.argv:
        for name, fn, args, nbytes in bf16_cases():
            ms = bench(fn, *args)
            print(f"{name}: {ms * 1e3:.1f} us {nbytes / ms / 1e6:.0f} GB/s", flush=True)
        return
    cases = []
    x = torch.randn(8192, 16384, device="cuda")
    w = torch.randn(16384, device="cuda")
    f = torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6), dynamic=False)
    cases.append(("rms 8192x16384 f32", f, (x, w), 8 * x.numel()))
    x2 = torch.randn(8192, 4096, device="cuda")
    w2 = torch.randn(4096, device="cuda")
    b2 = torch.randn(4096, device="cuda")
    g = torch.compile(lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-6), dynamic=False)
    cases.append(("layer 8192x4096 f32", g, (x2, w2, b2), 8 * x2.numel()))
    x3 = torch.randn(8192, 8192, device="cuda")
    h = torch.compile(lambda x: torch.softmax(0.5 * x, dim=-1), dynamic=False)
    cases.append(("softmax t=0.5 8192x8192", h, (x3,), 8 * x3.numel()))
    h1 = torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False)
    cases.append(("softmax t=1 8192x8192", h1, (x3,), 8 * x3.numel()))
    for name, fn, args, nbytes in cases:
        ms = bench(fn, *args)
        print(f"{name}: {ms * 1e3:.1f} us {nbytes / ms / 1e6:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
