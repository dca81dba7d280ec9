//! The `wgmma` products with both operands MN-major (`wgmma::mma_*_m64n64k{64,128}_mn_async`,
//! attention backward's `dQ = dS K` from the tile of `dS^T`) in the simulator, against the CPU:
//! one warpgroup stores `A^T` (`k x 64`, rows of 64 `m`) and `B` (`k x 64`) into 128-byte-swizzled
//! tiles with its own stores, fences them for the tensor cores, issues the product (8 steps of 16
//! along `k` for `k128`, 4 for `k64`), retires it and stores `C = A B`. The operands are small
//! integers, so bf16 and f16 hold them exactly and the product is exact: the result must equal
//! the CPU's bit for bit. The same tiles read with imm-trans-a 0 (`A` K-major) give another
//! matrix, so the check tells the transposes apart.

use gpukern_device::sim::{Dim3, Launch, LaunchConfig};
use gpukern_device::{bf16, f16, mem, shared, thread, tma, wgmma};

/// Threads: one warpgroup.
const THREADS: u32 = 128;

/// A product under test: accumulators, `A`'s and `B`'s descriptors of step 0, scale-d.
type Product = unsafe fn([f32; 32], u64, u64, bool) -> [f32; 32];

/// The byte `offset` past the first 1024-byte boundary of the dynamic shared memory.
fn aligned(offset: usize) -> *mut u8 {
    let base = shared::dynamic::<u8>();
    let pad = (1024 - wgmma::shared_address(base) as usize % 1024) % 1024;
    base.wrapping_add(pad + offset)
}

/// The warpgroup's kernel: `a_t` and `b` (`k x 64` 16-bit elements each, row-major) stored into
/// swizzled tiles, fenced, a block barrier, the product, its wait, `c` (`64 x 64` f32) stored.
///
/// # Safety
/// `a_t` and `b` hold `64 k` elements each, `c` 4096 floats; one block of [`THREADS`] threads with
/// `1024 + 2 * 128 k` bytes of dynamic shared memory.
unsafe fn kernel<T: Copy>(a_t: *const T, b: *const T, c: *mut f32, k: usize, product: Product) {
    let t = thread::thread_idx_x() as usize;
    let (ta, tb) = (aligned(0), aligned(128 * k));
    // Pairs of elements: `32 k` per operand, `k / 4` per thread.
    for pair in (t..32 * k).step_by(THREADS as usize) {
        let (row, col) = (2 * pair / 64, 2 * pair % 64);
        let at = tma::swizzle_128b(row * 128 + 2 * col);
        // SAFETY: the caller's contract; the swizzle keeps a pair inside its 16-byte chunk.
        unsafe {
            let x: u32 = mem::load(a_t.cast::<u32>(), pair);
            mem::store(ta.wrapping_add(at).cast::<u32>(), 0, x);
            let y: u32 = mem::load(b.cast::<u32>(), pair);
            mem::store(tb.wrapping_add(at).cast::<u32>(), 0, y);
        }
    }
    wgmma::fence_proxy_async();
    thread::sync_threads();
    let (sa, sb) = (wgmma::shared_address(ta), wgmma::shared_address(tb));
    // SAFETY: the whole warpgroup; the tiles are stored, fenced and stay until the wait.
    let acc = unsafe {
        let acc = product(
            <[f32; 32] as wgmma::Accumulators>::zeroed(),
            wgmma::desc_sw128(sa, 8192, 1024),
            wgmma::desc_sw128(sb, 8192, 1024),
            false,
        );
        wgmma::wait_accumulators::<0, _>(acc)
    };
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    for (i, &v) in acc.iter().enumerate() {
        let (row, col) = (16 * w + g + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * q + i % 2);
        // SAFETY: `row, col < 64`.
        unsafe { mem::store(c, 64 * row + col, v) };
    }
}

/// Runs `product` over `k` on integer operands of type `T` (`to` rounds an f32 to it): the
/// simulator's `C` and the CPU's.
fn run<T: Copy>(name: &'static str, k: usize, product: Product, to: fn(f32) -> T) -> (Vec<f32>, Vec<f32>) {
    let a_t: Vec<f32> = (0..64 * k).map(|i| ((i * 5 + i / 64) % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..64 * k)
        .map(|i| ((i * 3 + i / 64 * 5) % 9) as f32 - 4.0)
        .collect();
    let want: Vec<f32> = (0..64 * 64)
        .map(|i| (0..k).map(|kk| a_t[kk * 64 + i / 64] * b[kk * 64 + i % 64]).sum())
        .collect();
    let (a_t, b): (Vec<T>, Vec<T>) = (a_t.into_iter().map(to).collect(), b.into_iter().map(to).collect());
    let mut c = vec![f32::NAN; 64 * 64];
    let config = LaunchConfig {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(THREADS, 1, 1),
        shared_mem_bytes: (1024 + 2 * 128 * k) as u32,
    };
    let mut launch = Launch::new(name, config);
    let (pa, pb, pc) = (
        launch.input("a_t", &a_t),
        launch.input("b", &b),
        launch.output("c", &mut c),
    );
    // SAFETY: `a_t`, `b` hold `64 k` elements, `c` 4096 floats; the launch is the kernel's.
    let result = unsafe { launch.run(|| kernel(pa, pb, pc, k, product)) };
    result.unwrap();
    (c, want)
}

#[test]
fn mn_major_products_equal_the_cpu_product() {
    let cases: [(&'static str, usize, Product, bool); 4] = [
        ("mn_bf16_k128", 128, wgmma::mma_bf16_m64n64k128_mn_async, true),
        ("mn_f16_k128", 128, wgmma::mma_f16_m64n64k128_mn_async, false),
        ("mn_bf16_k64", 64, wgmma::mma_bf16_m64n64k64_mn_async, true),
        ("mn_f16_k64", 64, wgmma::mma_f16_m64n64k64_mn_async, false),
    ];
    for (name, k, product, is_bf16) in cases {
        let (got, want) = if is_bf16 {
            run(name, k, product, bf16::from_f32)
        } else {
            run(name, k, product, f16::from_f32)
        };
        assert_eq!(got, want, "{name}");
    }
}

/// The check tells the transposes apart: the K-major product (`mma_bf16_m64n64k64_kb_async`,
/// imm-trans-a 0 and imm-trans-b 0) over the same tiles is another matrix.
#[test]
fn the_same_tiles_read_k_major_differ() {
    let (got, want) = run(
        "kb_bf16_k64",
        64,
        wgmma::mma_bf16_m64n64k64_kb_async,
        bf16::from_f32,
    );
    assert_ne!(got, want);
}
