//! [`gpukern_device::math`] on the GPU: each function over an array of inputs, one thread per
//! element, the function picked by a selector (the tables below name them), so that the runner
//! measures each against its f64 reference (the `fast` instructions' bounds) or against the
//! host's own bits (the `accurate` functions, which must be identical).

use gpukern_device::math::packed::{Bf16x2, F16x2};
use gpukern_device::math::{accurate, fast};
use gpukern_device::{kernel, mem, thread};

/// A function of a table: its name and the function.
pub type Named = (&'static str, fn(f32) -> f32);

/// The functions of [`math_accurate`](fn@math_accurate), by selector.
pub const ACCURATE: [Named; 9] = [
    ("exp", accurate::exp),
    ("exp2", accurate::exp2),
    ("log", accurate::log),
    ("tanh", accurate::tanh),
    ("erf", accurate::erf),
    ("sin", accurate::sin),
    ("cos", accurate::cos),
    ("rcp", accurate::rcp),
    ("rsqrt", accurate::rsqrt),
];

/// The functions of [`math_fast`](fn@math_fast), by selector.
pub const FAST: [Named; 11] = [
    ("tanh", fast::tanh),
    ("exp2", fast::exp2),
    ("log2", fast::log2),
    ("rcp", fast::rcp),
    ("rsqrt", fast::rsqrt),
    ("sin", fast::sin),
    ("cos", fast::cos),
    ("exp", fast::exp),
    ("log", fast::log),
    ("exp2_ftz", fast::exp2_ftz),
    ("rcp_ftz", fast::rcp_ftz),
];

/// The operations of [`math_packed`](fn@math_packed), by selector: `(name, bf16x2 op, f16x2 op)`, each on the
/// pairs `a` and `b` (`fma` computes `a * b + a`; the one-operand ones ignore `b`).
pub const PACKED: [&str; 9] = [
    "fma", "add", "mul", "max", "min", "max_nan", "min_nan", "tanh", "exp2",
];

/// `y[i] = f(x[i])` for `i < n`, `f` the `which`-th function of [`ACCURATE`] (each thread
/// selects the same function; a `match` on a uniform value).
///
/// # Safety
/// `x` and `y` hold `n` floats; `which < 9`.
#[kernel]
pub unsafe fn math_accurate(x: *const f32, y: *mut f32, n: usize, which: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        let v = unsafe { mem::load(x, i) };
        let r = match which {
            0 => accurate::exp(v),
            1 => accurate::exp2(v),
            2 => accurate::log(v),
            3 => accurate::tanh(v),
            4 => accurate::erf(v),
            5 => accurate::sin(v),
            6 => accurate::cos(v),
            7 => accurate::rcp(v),
            _ => accurate::rsqrt(v),
        };
        // SAFETY: `i < n`.
        unsafe { mem::store(y, i, r) }
    }
}

/// `y[i] = f(x[i])` for `i < n`, `f` the `which`-th function of [`FAST`].
///
/// # Safety
/// `x` and `y` hold `n` floats; `which < 11`.
#[kernel]
pub unsafe fn math_fast(x: *const f32, y: *mut f32, n: usize, which: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        let v = unsafe { mem::load(x, i) };
        let r = match which {
            0 => fast::tanh(v),
            1 => fast::exp2(v),
            2 => fast::log2(v),
            3 => fast::rcp(v),
            4 => fast::rsqrt(v),
            5 => fast::sin(v),
            6 => fast::cos(v),
            7 => fast::exp(v),
            8 => fast::log(v),
            9 => fast::exp2_ftz(v),
            _ => fast::rcp_ftz(v),
        };
        // SAFETY: `i < n`.
        unsafe { mem::store(y, i, r) }
    }
}

/// `y[i] = fast::div(a[i], b[i])` for `i < n`.
///
/// # Safety
/// `a`, `b` and `y` hold `n` floats.
#[kernel]
pub unsafe fn math_div_fast(a: *const f32, b: *const f32, y: *mut f32, n: usize) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        unsafe { mem::store(y, i, fast::div(mem::load(a, i), mem::load(b, i))) }
    }
}

/// `y[i] = op(a[i], b[i])` on pairs of bf16 (`f16 == 0`) or f16 (`f16 != 0`) for `i < n`, `op`
/// the `which`-th of [`PACKED`].
///
/// # Safety
/// `a`, `b` and `y` hold `n` pairs; `which < 9`.
#[kernel]
pub unsafe fn math_packed(a: *const u32, b: *const u32, y: *mut u32, n: usize, which: u32, f16: u32) {
    let i = thread::index_1d();
    if i < n {
        // SAFETY: `i < n`.
        let (a, b) = unsafe { (mem::load(a, i), mem::load(b, i)) };
        let r = packed_op(which, f16 != 0, a, b);
        // SAFETY: `i < n`.
        unsafe { mem::store(y, i, r) }
    }
}

/// The `which`-th operation of [`PACKED`] on the bf16 (or, `f16`, f16) pairs `a` and `b`: what
/// [`math_packed`](fn@math_packed) computes per element, and on the host the simulator's model of it.
#[inline(always)]
pub fn packed_op(which: u32, f16: bool, a: u32, b: u32) -> u32 {
    /// The operation on one pair type.
    macro_rules! on {
        ($a:expr, $b:expr) => {{
            let (a, b) = ($a, $b);
            match which {
                0 => a.fma(b, a),
                1 => a + b,
                2 => a * b,
                3 => a.max(b),
                4 => a.min(b),
                5 => a.max_nan(b),
                6 => a.min_nan(b),
                7 => a.tanh(),
                _ => a.exp2(),
            }
            .0
        }};
    }
    if f16 {
        on!(F16x2(a), F16x2(b))
    } else {
        on!(Bf16x2(a), Bf16x2(b))
    }
}
