//! Vectors of any element in the simulator ([`gpukern_device::vector`]):
//!
//! 1. `load` / `store` move the same values as element-by-element accesses, for every lane type
//!    and every width (4 to 64 bytes), with every cache hint.
//! 2. `map` computes every element exactly once on ragged lengths, with grids that cover the
//!    array in one sweep or in several; `Chunk::load_columns` broadcasts a per-column vector.
//! 3. Planted bugs: a vector access at an index that is not a multiple of its lanes (a
//!    misaligned-address fault on a GPU), a read-only load from a buffer the kernel writes, and an
//!    element-wise loop that reads its ragged end as a whole vector.

mod common;

use common::assert_report;
use gpukern_device::sim::{Access, Dim3, Launch, LaunchConfig, SimError, Space, Violation};
use gpukern_device::vector::{self, Chunk, Lane, LoadHint, StoreHint};
use gpukern_device::{bf16, f16, thread};

/// `n` elements of `T` in 16-byte aligned host memory (as every device buffer is), from `f(i)`.
fn aligned<T: Copy>(n: usize, f: impl Fn(usize) -> T) -> Aligned<T> {
    let words = (n * size_of::<T>()).div_ceil(16).max(1);
    let mut store = vec![0u128; words];
    let data = store.as_mut_ptr().cast::<T>();
    for i in 0..n {
        // SAFETY: `store` holds at least `n` elements of `T`, aligned to 16 >= align_of::<T>().
        unsafe { data.add(i).write(f(i)) };
    }
    Aligned {
        _store: store,
        data,
        n,
    }
}

/// Host memory aligned to 16 bytes, holding `n` elements of `T`.
struct Aligned<T> {
    _store: Vec<u128>,
    data: *mut T,
    n: usize,
}

impl<T> Aligned<T> {
    fn slice(&self) -> &[T] {
        // SAFETY: `data` points to `n` initialised elements owned by `_store`.
        unsafe { std::slice::from_raw_parts(self.data, self.n) }
    }
    fn slice_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.n) }
    }
}

fn linear(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid: Dim3::new(blocks, 1, 1),
        block: Dim3::new(threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Loads and stores of every lane type and width
// ---------------------------------------------------------------------------------------------

/// One thread per vector: `y[v N..v N + N] = x[v N..v N + N]` through `load_hinted` /
/// `store_hinted` with the given hints, for the `n / N` whole vectors.
///
/// # Safety
/// `x`, `y` hold `n` elements, 16-byte aligned.
unsafe fn copy_vectors<T: Lane, const N: usize>(
    x: *const T,
    y: *mut T,
    n: usize,
    load: LoadHint,
    store: StoreHint,
) {
    let v = thread::index_1d();
    if (v + 1) * N <= n {
        // SAFETY: vector `v` lies inside both arrays, at a multiple of `N`.
        unsafe {
            let lanes: [T; N] = vector::load_hinted(x, v * N, load);
            vector::store_hinted(y, v * N, lanes, store);
        }
    }
}

/// Copies `n` elements `f(i)` through `copy_vectors::<T, N>` with every pair of hints, and checks
/// the copy bit for bit (the elements past the last whole vector stay at their start value).
fn copies_exactly<T: Lane + PartialEq + std::fmt::Debug, const N: usize>(f: impl Fn(usize) -> T) {
    let n = 8 * N * 5 + N / 2;
    let loads = [
        LoadHint::Default,
        LoadHint::ReadOnly,
        LoadHint::Streaming,
        LoadHint::EvictFirst,
        LoadHint::EvictLast,
    ];
    let stores = [
        StoreHint::Default,
        StoreHint::Streaming,
        StoreHint::EvictFirst,
        StoreHint::EvictLast,
    ];
    for (load, store) in loads.iter().flat_map(|l| stores.iter().map(move |s| (*l, *s))) {
        let x = aligned(n, &f);
        let mut y = aligned(n, |_| T::ZERO);
        let mut launch = Launch::new("copy_vectors", linear(2, 32));
        let (px, py) = (launch.input("x", x.slice()), launch.output("y", y.slice_mut()));
        // SAFETY: both hold `n` elements, 16-byte aligned.
        unsafe { launch.run(|| copy_vectors::<T, N>(px, py, n, load, store)) }.unwrap();
        let whole = n / N * N;
        assert_eq!(&y.slice()[..whole], &x.slice()[..whole], "{load:?} {store:?}");
        assert!(y.slice()[whole..].iter().all(|v| *v == T::ZERO));
    }
}

#[test]
fn vectors_of_every_lane_type_and_width_copy_exactly() {
    copies_exactly::<f32, 1>(|i| i as f32 * 0.5 - 3.0);
    copies_exactly::<f32, 2>(|i| i as f32 * 0.5 - 3.0);
    copies_exactly::<f32, 4>(|i| i as f32 * 0.5 - 3.0);
    copies_exactly::<f32, 8>(|i| i as f32 * 0.5 - 3.0);
    copies_exactly::<f32, 16>(|i| i as f32 * 0.5 - 3.0);
    copies_exactly::<bf16, 2>(|i| bf16::from_f32(i as f32 - 40.0));
    copies_exactly::<bf16, 4>(|i| bf16::from_f32(i as f32 - 40.0));
    copies_exactly::<bf16, 8>(|i| bf16::from_f32(i as f32 - 40.0));
    copies_exactly::<f16, 8>(|i| f16::from_f32(i as f32 / 8.0));
    copies_exactly::<u8, 4>(|i| (i * 7) as u8);
    copies_exactly::<u8, 16>(|i| (i * 7) as u8);
    copies_exactly::<i8, 8>(|i| (i as i8).wrapping_mul(-3));
    copies_exactly::<i32, 4>(|i| i as i32 * -1001);
    copies_exactly::<u32, 4>(|i| (i as u32).wrapping_mul(2_654_435_761));
    copies_exactly::<u64, 2>(|i| (i as u64) << 40 | 7);
    copies_exactly::<f64, 2>(|i| i as f64 / 3.0);
}

// ---------------------------------------------------------------------------------------------
// 2. map and the chunk helpers
// ---------------------------------------------------------------------------------------------

/// `y = gelu-like(x + bias[col])` through `vector::map` in chunks of 8 bf16: the shape of a
/// user's bias + activation kernel (here `t * 0.5 - 1`, exact in bf16 for these inputs).
///
/// # Safety
/// `x`, `y` hold `rows * cols` elements, `bias` `cols`; all 16-byte aligned.
unsafe fn bias_affine(x: *const bf16, bias: *const f32, y: *mut f32, rows: usize, cols: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        vector::map::<bf16, f32, 8>(x, y, rows * cols, |chunk, v| {
            let b = chunk.load_columns(bias, cols);
            core::array::from_fn(|k| (v[k] + b[k]) * 0.5 - 1.0)
        })
    }
}

fn runs_bias_affine(rows: usize, cols: usize, blocks: u32, threads: u32) {
    let n = rows * cols;
    let x = aligned(n, |i| bf16::from_f32((i % 61) as f32 - 30.0));
    let bias = aligned(cols, |c| c as f32 * 0.25);
    // Two sentinels past the end: nothing may write them.
    let mut y = aligned(n + 2, |_| -7.0f32);
    let mut launch = Launch::new("bias_affine", linear(blocks, threads));
    let (px, pb) = (launch.input("x", x.slice()), launch.input("bias", bias.slice()));
    // The output registered with its `n` elements only: a write past them is out of bounds.
    let py = launch.output("y", &mut y.slice_mut()[..n]);
    // SAFETY: sizes as the kernel asks; all aligned.
    unsafe { launch.run(|| bias_affine(px, pb, py, rows, cols)) }.unwrap();
    let got = y.slice();
    for (i, (g, v)) in got.iter().zip(x.slice()).enumerate() {
        let want = (v.to_f32() + bias.slice()[i % cols]) * 0.5 - 1.0;
        assert_eq!(*g, want, "{rows} x {cols}, element {i}");
    }
    assert_eq!(&got[n..], &[-7.0, -7.0]);
}

#[test]
fn map_computes_every_element_once_on_ragged_shapes() {
    // Columns a multiple of the lanes (vector bias loads) and not (lane by lane), lengths below
    // one vector, one sweep and several (a grid of 1 or 2 blocks going round the loop).
    for (rows, cols) in [(1, 1), (1, 7), (3, 8), (5, 24), (7, 13), (9, 100), (33, 64)] {
        runs_bias_affine(rows, cols, vector::map_blocks(rows * cols, 8, 64), 64);
        runs_bias_affine(rows, cols, 1, 32);
        runs_bias_affine(rows, cols, 2, 96);
    }
}

#[test]
fn map_blocks_covers_the_array_in_one_sweep() {
    assert_eq!(vector::map_blocks(0, 8, 256), 1);
    assert_eq!(vector::map_blocks(8 * 256 * 4, 8, 256), 1);
    assert_eq!(vector::map_blocks(8 * 256 * 4 + 1, 8, 256), 2);
    assert_eq!(vector::map_blocks(8192 * 8192, 8, 256), 8192);
}

#[test]
fn chunks_know_their_lanes_and_columns() {
    let whole = Chunk::<8>::of(2, 100);
    assert_eq!((whole.start, whole.len, whole.is_whole()), (16, 8, true));
    let ragged = Chunk::<8>::of(12, 100);
    assert_eq!((ragged.start, ragged.len, ragged.is_whole()), (96, 4, false));
    assert_eq!(whole.column(10), 6);
    let far = Chunk::<8> {
        start: 1 << 40,
        len: 8,
    };
    assert_eq!(far.column(3), (1usize << 40) % 3);
}

// ---------------------------------------------------------------------------------------------
// 3. Planted bugs
// ---------------------------------------------------------------------------------------------

/// One thread per vector of 8 bf16, starting at element `offset`: misaligned unless `offset` is
/// a multiple of 8.
///
/// # Safety
/// `x` holds `offset + 8 * threads` elements.
unsafe fn shifted_vectors(x: *const bf16, y: *mut bf16, offset: usize) {
    let v = thread::index_1d();
    // SAFETY: in bounds; aligned only for an `offset` that is a multiple of 8 (the planted bug).
    unsafe {
        let lanes: [bf16; 8] = vector::load(x, offset + 8 * v);
        vector::store(y, 8 * v, lanes);
    }
}

#[test]
fn a_vector_access_off_its_lanes_is_reported_misaligned() {
    let x = aligned(8 * 32 + 8, |i| bf16::from_f32(i as f32));
    for offset in [0, 8] {
        let mut y = aligned(8 * 32, |_| bf16::ZERO);
        let mut launch = Launch::new("shifted_vectors", linear(1, 32));
        let (px, py) = (launch.input("x", x.slice()), launch.output("y", y.slice_mut()));
        // SAFETY: in bounds and aligned.
        unsafe { launch.run(|| shifted_vectors(px, py, offset)) }.unwrap();
        assert_eq!(y.slice(), &x.slice()[offset..offset + 256]);
    }
    let mut y = aligned(8 * 32, |_| bf16::ZERO);
    let mut launch = Launch::new("shifted_vectors", linear(1, 32));
    let (px, py) = (launch.input("x", x.slice()), launch.output("y", y.slice_mut()));
    // SAFETY: in bounds; misaligned, which the simulator must report.
    let result = unsafe { launch.run(|| shifted_vectors(px, py, 4)) };
    let err = result.expect_err("a misaligned vector load went unreported");
    println!("{err}");
    assert_eq!(
        (err.kernel.as_str(), err.thread),
        ("shifted_vectors", Dim3::new(0, 0, 0))
    );
    assert!(
        matches!(&err.violation, Violation::Panic { message } if message.contains("misaligned 16-byte read")),
        "{err}"
    );
}

/// `y[i] += 1` for every whole vector of 4 floats, reading `y` through the read-only path: the
/// planted bug (`ld.global.nc` of data the kernel writes).
///
/// # Safety
/// `y` holds `4 * threads` floats.
unsafe fn read_only_of_an_output(y: *mut f32) {
    let v = thread::index_1d();
    // SAFETY: in bounds and aligned; the hint is the bug.
    unsafe {
        let lanes: [f32; 4] = vector::load_hinted(y, 4 * v, LoadHint::ReadOnly);
        vector::store(y, 4 * v, lanes.map(|x| x + 1.0));
    }
}

#[test]
fn a_read_only_load_of_a_buffer_the_kernel_writes_is_reported() {
    let mut y = aligned(128, |i| i as f32);
    let mut launch = Launch::new("read_only_of_an_output", linear(1, 32));
    let py = launch.output("y", y.slice_mut());
    // SAFETY: in bounds; the read-only load of `y` is what must be reported.
    let result = unsafe { launch.run(|| read_only_of_an_output(py)) };
    let err = result.expect_err("a read-only load of an output went unreported");
    println!("{err}");
    assert!(
        matches!(&err.violation, Violation::Panic { message }
            if message.contains("read-only load") && message.contains("`y`")),
        "{err}"
    );
}

/// An element-wise `y = 2 x` written by hand with whole vectors only: the ragged end is read
/// (and written) as a whole vector of 4, past the arrays.
///
/// # Safety
/// None: the last vector reaches past `n` when `n % 4 != 0` (the planted bug).
unsafe fn double_without_a_tail(x: *const f32, y: *mut f32, n: usize) {
    let v = thread::index_1d();
    if 4 * v < n {
        // SAFETY: not for the last, partial vector.
        unsafe {
            let lanes: [f32; 4] = vector::load(x, 4 * v);
            vector::store(y, 4 * v, lanes.map(|x| 2.0 * x));
        }
    }
}

#[test]
fn a_vector_loop_without_its_ragged_end_is_reported_out_of_bounds() {
    let n = 10;
    let x = aligned(n, |i| i as f32);
    let mut y = aligned(n, |_| 0.0f32);
    let mut launch = Launch::new("double_without_a_tail", linear(1, 32));
    let (px, py) = (launch.input("x", x.slice()), launch.output("y", y.slice_mut()));
    // SAFETY: the last vector is past the arrays, which the simulator must report.
    let result = unsafe { launch.run(|| double_without_a_tail(px, py, n)) };
    assert_report(
        result,
        SimError {
            kernel: "double_without_a_tail".into(),
            block: Dim3::new(0, 0, 0),
            thread: Dim3::new(2, 0, 0),
            violation: Violation::OutOfBounds {
                space: Space::Global,
                buffer: "x".into(),
                access: Access::Read,
                // The index counts 16-byte vectors from the start; the length, the buffer's floats.
                index: 2,
                len: 10,
            },
        },
    );
}
