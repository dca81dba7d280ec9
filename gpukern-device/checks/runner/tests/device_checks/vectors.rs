//! `gpukern_device_checks::vectors`: every cache hint's load and store instruction copying data
//! exactly (4, 8, 16 and 64-byte vectors), and `vector::map` on ragged shapes against the CPU.

use gpukern::{LaunchConfig, Module, bf16};
use gpukern_device_checks::vectors::{copy_bf16x8, copy_f32x2, copy_f32x16, copy_u8x4, map_bias_affine};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;

use crate::{Check, Sizes, Target, expect_all, linear, trial};

pub fn trials(target: &Target) -> Vec<Trial> {
    vec![
        trial(target, "vectors::copy_with_every_hint", copies),
        trial(target, "vectors::map_on_ragged_shapes", maps),
    ]
}

/// A hinted copy kernel's launcher: `kernel(x, y, n, load, store)`.
type Copy<T> = for<'a> unsafe fn(
    &'a Module,
    LaunchConfig,
    gpukern::DeviceSlice<'a, T>,
    gpukern::DeviceSliceMut<'a, T>,
    usize,
    u32,
    u32,
) -> gpukern::Result<()>;

/// Copies `x` with `launch` (vectors of `lanes`) for every pair of hints; the whole vectors must
/// arrive exactly and the ragged end stay untouched.
fn copy_all_hints<T: gpukern::Element + PartialEq + std::fmt::Debug>(
    module: &Module,
    name: &str,
    launch: Copy<T>,
    x: &[T],
    lanes: usize,
    fill: T,
) -> Check {
    let gpu = module.gpu();
    let n = x.len();
    let xd = gpu.upload(x)?;
    let whole = n / lanes * lanes;
    for load in 0..6 {
        for store in 0..4 {
            let mut yd = gpu.upload(&vec![fill; n])?;
            // SAFETY: both hold `n` elements; device buffers are 16-byte aligned.
            unsafe {
                launch(
                    module,
                    linear(n / lanes),
                    xd.view(),
                    yd.view_mut(),
                    n,
                    load,
                    store,
                )
            }?;
            let y = yd.to_vec()?;
            let what = format!("{name}, load hint {load}, store hint {store}");
            expect_all(&what, &y[..whole], &x[..whole], |a, b| a == b)?;
            expect_all(
                &format!("{what}: the ragged end"),
                &y[whole..],
                &vec![fill; n - whole],
                |a, b| a == b,
            )?;
        }
    }
    Ok(())
}

fn copies(module: &Module, sizes: &Sizes, rng: &mut StdRng) -> Check {
    for &n in sizes.elements {
        let n = n + 5;
        let b: Vec<bf16> = (0..n)
            .map(|_| bf16::from_f32(rng.random_range(-4.0..4.0)))
            .collect();
        copy_all_hints(
            module,
            "copy_bf16x8",
            copy_bf16x8::launch_views::<Module>,
            &b,
            8,
            bf16::from_f32(-9.0),
        )?;
        let u: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        copy_all_hints(
            module,
            "copy_u8x4",
            copy_u8x4::launch_views::<Module>,
            &u,
            4,
            0xee,
        )?;
        let f: Vec<f32> = (0..n).map(|_| rng.random()).collect();
        copy_all_hints(
            module,
            "copy_f32x2",
            copy_f32x2::launch_views::<Module>,
            &f,
            2,
            -1.0,
        )?;
        copy_all_hints(
            module,
            "copy_f32x16",
            copy_f32x16::launch_views::<Module>,
            &f,
            16,
            -1.0,
        )?;
    }
    Ok(())
}

fn maps(module: &Module, _: &Sizes, rng: &mut StdRng) -> Check {
    let gpu = module.gpu();
    let big = if gpu.is_simulator() { 64 } else { 4096 };
    for (rows, cols) in [(1, 1), (3, 7), (5, 24), (9, 100), (big, big), (big + 1, big + 3)] {
        let n = rows * cols;
        let x: Vec<bf16> = (0..n)
            .map(|_| bf16::from_f32(rng.random_range(-64.0f32..64.0).round()))
            .collect();
        let bias: Vec<f32> = (0..cols).map(|c| (c % 17) as f32 * 0.25).collect();
        let (xd, bd) = (gpu.upload(&x)?, gpu.upload(&bias)?);
        let mut yd = gpu.upload(&vec![f32::NAN; n])?;
        let config = LaunchConfig {
            grid: (gpukern::gpukern_device::vector::map_blocks(n, 8, 256), 1, 1),
            block: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `x` and `y` hold `rows * cols` elements, `bias` `cols`.
        unsafe { map_bias_affine::launch(module, config, &xd, &bd, &mut yd, rows, cols) }?;
        let want: Vec<f32> = (0..n)
            .map(|i| (x[i].to_f32() + bias[i % cols]) * 0.5 - 1.0)
            .collect();
        expect_all(
            &format!("map_bias_affine {rows} x {cols}"),
            &yd.to_vec()?,
            &want,
            |a, b| a == b,
        )?;
    }
    Ok(())
}
