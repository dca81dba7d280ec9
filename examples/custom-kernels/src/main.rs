//! A user's crate of kernels, end to end: the kernels in `kernels/` (compiled to PTX by
//! `build.rs`), launched through their generated launchers on every backend there is: the CPU
//! simulator always, and CUDA device 0 when there is one. Each result is checked against a CPU
//! reference; a mismatch is an error (exit status 1).
//!
//! `cargo run -p custom-kernels --release`

use std::error::Error;

use gpukern::gpukern_device::convert::Float;
use gpukern::gpukern_device::launch::Instance;
use gpukern::{DeviceVec, Element, Gpu, LaunchConfig, Module, PtxSet, bf16, f16};
use kernels::{BLOCK, Particle, Step};

/// The PTX `build.rs` compiled from `kernels/`.
static KERNELS: PtxSet = gpukern::include_ptx!(kernels);

type Res<T> = Result<T, Box<dyn Error>>;

fn main() -> Res<()> {
    let mut gpus = vec![Gpu::simulator()];
    match Gpu::new(0) {
        Ok(gpu) => gpus.push(gpu),
        // `GPUKERN_REQUIRE_GPU=1` (the GPU machine's check) makes a missing GPU a failure.
        Err(e) if e.is_no_gpu() && std::env::var("GPUKERN_REQUIRE_GPU").as_deref() != Ok("1") => {
            println!("no GPU ({e}); running in the simulator only")
        }
        Err(e) => return Err(e.into()),
    }
    for gpu in &gpus {
        println!("== {}", gpu.describe());
        let module = gpu.load(&KERNELS)?;
        increment_by_one(&module)?;
        grayscale(&module)?;
        scale::<f32>(&module)?;
        scale::<bf16>(&module)?;
        scale::<f16>(&module)?;
        block_sum(&module)?;
        histogram(&module)?;
        hello(&module)?;
        saxpy(&module)?;
        advance(&module)?;
    }
    Ok(())
}

/// `ceil(n / BLOCK)` blocks of `BLOCK` threads.
fn one_thread_per_element(n: usize, shared_mem_bytes: u32) -> LaunchConfig {
    LaunchConfig {
        grid: (n.div_ceil(BLOCK as usize) as u32, 1, 1),
        block: (BLOCK, 1, 1),
        shared_mem_bytes,
    }
}

/// The simulator runs every thread's Rust code on the CPU: smaller inputs there.
fn size(module: &Module, on_gpu: usize, in_simulator: usize) -> usize {
    if module.gpu().is_simulator() {
        in_simulator
    } else {
        on_gpu
    }
}

fn check(what: &str, ok: bool) -> Res<()> {
    if ok {
        println!("  {what}: ok");
        Ok(())
    } else {
        Err(format!("{what}: the result differs from the CPU reference").into())
    }
}

fn increment_by_one(module: &Module) -> Res<()> {
    let n = size(module, 10_000_019, 100_003);
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let mut x = module.gpu().upload(&host)?;
    // SAFETY: `x` holds `n` elements.
    unsafe { kernels::increment_by_one::launch(module, one_thread_per_element(n, 0), &mut x, n) }?;
    let got = x.to_vec()?;
    check(
        &format!("increment_by_one, {n} elements"),
        got.iter().zip(&host).all(|(g, h)| *g == h + 1.0),
    )
}

fn grayscale(module: &Module) -> Res<()> {
    let (width, height) = (size(module, 1920, 333), size(module, 1081, 217));
    let rgb: Vec<u8> = (0..3 * width * height).map(|i| (i * 7 % 256) as u8).collect();
    let gpu = module.gpu();
    let input = gpu.upload(&rgb)?;
    let mut gray = gpu.zeros_of::<u8>(width * height)?;
    let config = LaunchConfig {
        grid: (width.div_ceil(16) as u32, height.div_ceil(16) as u32, 1),
        block: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `input` holds 3 bytes per pixel, `gray` one.
    unsafe { kernels::grayscale::launch(module, config, &input, &mut gray, width, height) }?;
    let expected: Vec<u8> = rgb
        .chunks(3)
        .map(|p| ((77 * p[0] as u32 + 150 * p[1] as u32 + 29 * p[2] as u32 + 128) >> 8) as u8)
        .collect();
    check(
        &format!("grayscale, {width} x {height}"),
        gray.to_vec()? == expected,
    )
}

/// An element type of the example's generic `scale` kernel, with the host's conversions for the
/// CPU reference.
trait Scaled: Element + PartialEq + std::fmt::Debug {
    const NAME: &'static str;
    fn of(x: f32) -> Self;
    fn f32(self) -> f32;
}

impl Scaled for f32 {
    const NAME: &'static str = "f32";
    fn of(x: f32) -> f32 {
        x
    }
    fn f32(self) -> f32 {
        self
    }
}

impl Scaled for bf16 {
    const NAME: &'static str = "bf16";
    fn of(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
    fn f32(self) -> f32 {
        self.to_f32()
    }
}

impl Scaled for f16 {
    const NAME: &'static str = "f16";
    fn of(x: f32) -> f16 {
        f16::from_f32(x)
    }
    fn f32(self) -> f32 {
        self.to_f32()
    }
}

/// The generic `scale` kernel for element `T`: `kernels::scale::<T>::launch`, one kernel written
/// once and launched for three types (the bound says `T` is one of its instances).
fn scale<T: Scaled + Float>(module: &Module) -> Res<()>
where
    kernels::scale<T>: Instance,
{
    let n = size(module, 1 << 24, 10_007);
    let host: Vec<T> = (0..n).map(|i| T::of((i % 251) as f32 / 16.0)).collect();
    let gpu = module.gpu();
    let x = gpu.upload(&host)?;
    let mut y = gpu.zeros_of::<T>(n)?;
    // SAFETY: `x` and `y` hold `n` elements.
    unsafe { kernels::scale::<T>::launch(module, one_thread_per_element(n, 0), &x, &mut y, 1.5, n) }?;
    // The product in f32, rounded once to `T`: the same bits as the kernel's.
    let expected: Vec<T> = host.iter().map(|&v| T::of(v.f32() * 1.5)).collect();
    check(
        &format!("scale::<{}>, {n} elements", T::NAME),
        y.to_vec()? == expected,
    )
}

fn block_sum(module: &Module) -> Res<()> {
    let n = size(module, 1 << 24, 70_001);
    let host: Vec<f32> = (0..n).map(|i| ((i * 37) % 101) as f32 / 101.0).collect();
    let gpu = module.gpu();
    let x = gpu.upload(&host)?;
    let blocks = n.div_ceil(BLOCK as usize);
    let mut partial: DeviceVec<f32> = gpu.zeros(blocks)?;
    // No shared memory asked for: the kernel declares its array, and its launcher adds it.
    let config = one_thread_per_element(n, 0);
    // SAFETY: `x` holds `n` elements, `partial` one per block.
    unsafe { kernels::block_sum::launch(module, config, &x, &mut partial, n) }?;
    let sum: f64 = partial.to_vec()?.iter().map(|&s| s as f64).sum();
    let expected: f64 = host.iter().map(|&v| v as f64).sum();
    // Each block adds 256 floats in f32 (8 rounding steps deep): relative error well under 1e-5.
    check(
        &format!("block_sum, {n} elements in {blocks} blocks"),
        (sum - expected).abs() <= 1e-5 * expected.abs(),
    )
}

fn histogram(module: &Module) -> Res<()> {
    // 2^24 atomic adds into 16 bins on the GPU: every one must land.
    let n = size(module, 1 << 24, (1 << 16) + 3);
    let nbins = 16u32;
    let host: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
        .collect();
    let gpu = module.gpu();
    let x = gpu.upload(&host)?;
    let mut bins = gpu.zeros_of::<u32>(nbins as usize)?;
    // SAFETY: `x` holds `n` elements, `bins` `nbins`.
    unsafe { kernels::histogram::launch(module, one_thread_per_element(n, 0), &x, &mut bins, n, nbins) }?;
    let mut expected = vec![0u32; nbins as usize];
    for v in &host {
        expected[(v % nbins) as usize] += 1;
    }
    check(
        &format!("histogram, {n} atomic adds into {nbins} bins"),
        bins.to_vec()? == expected,
    )
}

fn hello(module: &Module) -> Res<()> {
    let config = LaunchConfig {
        grid: (3, 1, 1),
        block: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel touches no memory.
    unsafe { kernels::hello::launch(module, config) }?;
    // On CUDA the device's printf text reaches stdout when the stream synchronises.
    module.gpu().synchronize()?;
    println!("  hello: 3 blocks printed (above)");
    Ok(())
}

/// The checked, grid-stride `saxpy`: a safe launch over as many blocks as the device holds.
fn saxpy(module: &Module) -> Res<()> {
    let n = size(module, (1 << 26) + 3, 300_007);
    let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
    let gpu = module.gpu();
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&y)?;
    let config = module.grid_stride(&kernels::saxpy::KERNEL, n, 256, 0)?;
    let per_sm = module.occupancy(&kernels::saxpy::KERNEL, (256, 1, 1), 0)?;
    // Checked: no `unsafe`, the launcher refuses buffers shorter than `n`.
    kernels::saxpy::launch(module, config, 0.5, &dx, &mut dy, n)?;
    let ok = dy
        .to_vec()?
        .iter()
        .zip(x.iter().zip(&y))
        .all(|(g, (a, b))| *g == 0.5 * a + b);
    check(
        &format!(
            "saxpy (checked, grid-stride), {n} elements over {} blocks ({per_sm} per multiprocessor)",
            config.grid.0
        ),
        ok,
    )?;
    // A buffer one element short is refused before anything runs.
    let short = gpu.upload(&x[..n - 1])?;
    let refused = kernels::saxpy::launch(module, config, 0.5, &short, &mut dy, n).is_err();
    check("saxpy refuses a buffer shorter than #[len(n)]", refused)
}

/// `advance`: a `DeviceVec<Particle>` of the example's own struct, a `Step` passed by value.
fn advance(module: &Module) -> Res<()> {
    let n = size(module, 1_000_003, 10_007);
    let particles: Vec<Particle> = (0..n)
        .map(|i| Particle {
            pos: [i as f32, -(i as f32), (i % 13) as f32 * 0.1],
            vel: [1.0, 0.5, (i % 7) as f32 - 3.0],
        })
        .collect();
    let step = Step {
        dt: 0.01,
        gravity: 9.81,
        floor: 0.0,
        damping: 0.8,
    };
    let mut d = module.gpu().upload(&particles)?;
    let config = one_thread_per_element(n, 0);
    for _ in 0..3 {
        kernels::advance::launch(module, config, &mut d, step, n)?;
    }
    let want: Vec<Particle> = particles
        .iter()
        .map(|&p| step.apply(step.apply(step.apply(p))))
        .collect();
    check(
        &format!("advance, {n} particles (a 24-byte struct) x 3 steps, a 16-byte struct by value"),
        d.to_vec()? == want,
    )
}
