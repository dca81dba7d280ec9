"""Peers of the `transfer` suite: host-device copies through torch, pinned and pageable.

Records match examples/bench/transfer.rs: kernel `transfer`, shape `<MiB>MiB`, `direction`
upload / download, gbps from the bytes copied once. Wall time per copy including its
synchronisation, like the gpukern rows.
"""

from __future__ import annotations

from typing import Any

import peers_common as C




def copy_len(quick: bool) -> int:
    """Floats per copy: 256 MiB (16 MiB quick), as `transfer::copy_len`."""
    return (4 << 20) if quick else (64 << 20)


def torch_transfer(ctx: Any) -> None:
    """`Tensor.to(device, non_blocking=True)` from a pinned tensor and `copy_` into a pinned
    tensor (`torch:pinned`); `.to('cuda')` from and `.to('cpu')` into pageable memory
    (`torch:pageable`)."""
    torch, sink = ctx.torch, ctx.sink
    n = copy_len(ctx.quick)
    nbytes = 4.0 * n
    reps, max_s = (5, 0.3) if ctx.quick else (20, 2.0)
    sync = torch.cuda.synchronize
    version = torch.__version__
    shape = f"{(4 * n) >> 20}MiB"
    device_src = ctx.rand((n,))
    host = device_src.cpu()
    pinned_src = host.pin_memory()
    pinned_dst = torch.empty(n, dtype=torch.float32, pin_memory=True)

    def exact(got: Any) -> Any:
        same = bool(torch.equal(got.cpu() if got.is_cuda else got, host))
        return C.Check(0.0 if same else float("inf"), 0.0, "input")

    def up_pinned() -> Any:
        d = pinned_src.to("cuda", non_blocking=True)
        sync()
        return d

    def down_pinned() -> Any:
        pinned_dst.copy_(device_src, non_blocking=True)
        sync()
        return pinned_dst

    def up_pageable() -> Any:
        d = host.to("cuda")
        sync()
        return d

    def down_pageable() -> Any:
        return device_src.to("cpu")

    for impl, direction, run in (
        ("torch:pinned", "upload", up_pinned),
        ("torch:pinned", "download", down_pinned),
        ("torch:pageable", "upload", up_pageable),
        ("torch:pageable", "download", down_pageable),
    ):
        base = C.record("transfer", impl, shape, n=n, direction=direction, version=version)

        def measure(run: Any = run, base: dict[str, Any] = base) -> dict[str, Any]:
            check = exact(run())
            if not check.passed:
                return C.checked(base, check)
            return C.timed(C.checked(base, check), C.wall_median(reps, max_s, run), nbytes)

        sink.item(base, measure)
