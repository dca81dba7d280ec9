//! Views of device buffers (`DeviceVec::slice`, `slice_mut`, `split_at_mut`, matrix rows) as
//! launch arguments, and the copies that write existing buffers: `fill`, `copy_from_host`,
//! `copy_from` (device to device, across streams too), each against the same operation on a
//! host `Vec`, with the elements outside the view checked untouched.
//!
//! The kernel is the library's `add` (`c[i] = a[i] + b[i]` for `i < n`) launched through its
//! generated launcher on views at odd offsets; in the simulator a launch whose `n` reaches past a
//! view, though not past its buffer, is reported at the view's bounds.

use gpukern::kernels::add::add;
use gpukern::{DeviceVec, Element, Error, Gpu, LaunchConfig, bf16};
use gpukern_device::sim::{Access, Violation};
use libtest_mimic::Trial;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, trial};

/// Every trial of this file.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, n) in [(sim, 1000), (cuda, (1 << 22) + 37)] {
        trials.extend([
            trial(target, "views::add_on_views", move |gpu, rng| {
                add_on_views(gpu, rng, n)
            }),
            trial(target, "views::split_halves", move |gpu, rng| {
                split_halves(gpu, rng, n)
            }),
            trial(target, "views::fill", move |gpu, rng| fill(gpu, rng, n)),
            trial(target, "views::copy_from_host", move |gpu, rng| {
                copy_from_host(gpu, rng, n)
            }),
            trial(target, "views::copy_from", move |gpu, rng| copy_from(gpu, rng, n)),
            trial(target, "views::matrix_rows", matrix_rows),
            trial(target, "views::errors", |gpu, _| errors(gpu)),
        ]);
    }
    trials.extend([
        trial(sim, "views::overrun_reported_at_the_view", |gpu, _| overrun(gpu)),
        trial(cuda, "views::copy_across_streams", |gpu, rng| {
            copy_across_streams(gpu, rng, 2048)
        }),
        trial(cuda, "views::wrong_device", |gpu, _| wrong_device(gpu)),
    ]);
    trials
}

/// One thread per element of `n`, in blocks of 256.
fn linear(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid: (n.div_ceil(256).max(1) as u32, 1, 1),
        block: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `add` on views at three different odd offsets: `c[2..2+m] = a[1..1+m] + b[..m]`, the rest of
/// `c` untouched; then the same with a whole vector and a view mixed.
fn add_on_views(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let m = n - 5;
    let (a, b) = (random_vec(rng, n), random_vec(rng, n));
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = poisoned_vec(gpu, n)?;
    // SAFETY: each view holds `m` elements.
    unsafe {
        add::launch(
            &gpu.library(),
            linear(m),
            da.slice(1..1 + m)?,
            db.slice(..m)?,
            dc.slice_mut(2..2 + m)?,
            m,
        )
    }?;
    let got = dc.to_vec()?;
    let want: Vec<f32> = (0..m).map(|i| a[1 + i] + b[i]).collect();
    check_abs("c[2..2+m] = a[1..1+m] + b[..m]", &got[2..2 + m], &want, 0.0)?;
    expect_untouched("c outside the view", &[&got[..2], &got[2 + m..]])?;

    // A whole vector beside a view of another: `c[..n] = a + b` where `b` is `db` itself.
    let mut dc2 = poisoned_vec(gpu, n + 3)?;
    // SAFETY: every buffer holds `n` elements.
    unsafe { add::launch(&gpu.library(), linear(n), &da, &db, dc2.slice_mut(3..)?, n) }?;
    let got = dc2.to_vec()?;
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    check_abs("c[3..] = a + b", &got[3..], &want, 0.0)?;
    expect_untouched("c[..3]", &[&got[..3]])
}

/// One kernel reads one half of a buffer and writes the other (`split_at_mut`): `x[h..] =
/// x[..h] + x[..h]`, through a write view the launch takes by `&mut` and keeps.
fn split_halves(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let h = n / 2;
    let x = random_vec(rng, 2 * h);
    let mut dx = gpu.upload(&x)?;
    let (lo, mut hi) = dx.split_at_mut(h)?;
    // SAFETY: both halves hold `h` elements.
    unsafe { add::launch(&gpu.library(), linear(h), &lo, &lo, &mut hi, h) }?;
    // The view is still ours after the launch: read it back through it.
    let got = hi.to_vec()?;
    let want: Vec<f32> = x[..h].iter().map(|v| v + v).collect();
    check_abs("x[h..] = 2 x[..h]", &got, &want, 0.0)?;
    check_abs("x[..h] unchanged", &lo.as_slice().to_vec()?, &x[..h], 0.0)
}

/// `fill` of a range and of a whole vector, for element sizes 1, 2, 4 and 8 (a value that is no
/// 4-byte unit repeated takes the doubling path), at offsets that change the alignment.
fn fill(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    fill_one::<f32>(gpu, n, rng.random(), 1.5)?;
    fill_one::<f64>(gpu, n, rng.random(), -1.0e-3)?; // 0xbf50624dd2f1a9fc: halves differ
    fill_one::<u64>(gpu, n, rng.random(), 0x0001_0001_0001_0001)?; // a repeated 2-byte unit
    fill_one::<u8>(gpu, n, rng.random(), 0xa5)?;
    fill_one::<u16>(gpu, n, rng.random(), 0x1234)?;
    fill_one::<bf16>(gpu, n, bf16::from_f32(rng.random()), bf16::from_f32(-2.5))?;
    fill_one::<i32>(gpu, n, 0, 0)?;
    fill_one::<f64>(gpu, 1, 0.25, 7.0)?;
    // A user's struct of 3 bytes (1-byte units) and an array of 12 (4-byte units, not repeated).
    fill_one::<Rgb>(
        gpu,
        n,
        Rgb { r: 1, g: 2, b: 3 },
        Rgb {
            r: 200,
            g: 100,
            b: 50,
        },
    )?;
    fill_one::<[f32; 3]>(gpu, n, [0.5; 3], [1.0, -2.0, 3.5])
}

/// A 3-byte pixel: a `DeviceCopy` struct of the tests' own, as a buffer element.
#[derive(Clone, Copy, Debug, Default, PartialEq, gpukern_device::DeviceCopy)]
#[repr(C)]
struct Rgb {
    r: u8,
    g: u8,
    b: u8,
}

/// Fills `[1..n-2]` of a vector of `before`s with `value`, then the whole of another.
fn fill_one<T: Element + PartialEq + std::fmt::Debug>(gpu: &Gpu, n: usize, before: T, value: T) -> Check {
    let name = std::any::type_name::<T>();
    let mut host = vec![before; n];
    let mut dev = gpu.upload(&host)?;
    let range = 1.min(n)..n.saturating_sub(2).max(1.min(n));
    dev.slice_mut(range.clone())?.fill(value)?;
    host[range.clone()].fill(value);
    expect_same(&format!("fill {name} {range:?} of {n}"), &dev.to_vec()?, &host)?;
    let mut whole: DeviceVec<T> = gpu.upload(&vec![before; n])?;
    whole.fill(value)?;
    expect_same(&format!("fill all {n} {name}"), &whole.to_vec()?, &vec![value; n])
}

/// `copy_from_host` into a range, into a whole vector; the slice's `to_vec` and `copy_to_host`.
fn copy_from_host(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let (x, y) = (random_vec(rng, n), random_vec(rng, n - 7));
    let mut dev = gpu.upload(&x)?;
    dev.slice_mut(3..n - 4)?.copy_from_host(&y)?;
    let mut want = x.clone();
    want[3..n - 4].copy_from_slice(&y);
    check_abs("copy_from_host into [3..n-4]", &dev.to_vec()?, &want, 0.0)?;
    check_abs("the range's to_vec", &dev.slice(3..n - 4)?.to_vec()?, &y, 0.0)?;
    let mut out = vec![f32::NAN; 5];
    dev.slice(n - 5..)?.copy_to_host(&mut out)?;
    check_abs("the tail's copy_to_host", &out, &want[n - 5..], 0.0)?;
    dev.copy_from_host(&x)?;
    check_abs("copy_from_host of the whole", &dev.to_vec()?, &x, 0.0)
}

/// `copy_from` device to device: whole vectors, a range from a range, a matrix from a matrix.
fn copy_from(gpu: &Gpu, rng: &mut StdRng, n: usize) -> Check {
    let (x, y) = (random_vec(rng, n), random_vec(rng, n));
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&y)?;
    dy.slice_mut(5..n - 1)?.copy_from(dx.slice(1..n - 5)?)?;
    let mut want = y.clone();
    want[5..n - 1].copy_from_slice(&x[1..n - 5]);
    check_abs("y[5..n-1] = x[1..n-5]", &dy.to_vec()?, &want, 0.0)?;
    dy.copy_from(&dx)?;
    check_abs("y = x", &dy.to_vec()?, &x, 0.0)?;
    // Within one buffer: the first half into the second.
    let (lo, mut hi) = dy.split_at_mut(n / 2)?;
    hi.slice_mut(..n / 2)?.copy_from(&lo)?;
    let got = dy.to_vec()?;
    check_abs(
        "second half = first half",
        &got[n / 2..2 * (n / 2)],
        &x[..n / 2],
        0.0,
    )
}

/// Rows of a matrix as views: one row filled, a block of rows copied from another matrix's, a
/// row launched on, a whole matrix copied.
fn matrix_rows(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let (rows, cols) = (7, 33);
    let a = crate::common::random_matrix(rng, rows, cols);
    let b = crate::common::random_matrix(rng, rows, cols);
    let da = gpu.upload_matrix(&a)?;
    let mut db = gpu.upload_matrix(&b)?;
    db.row_mut(2)?.fill(4.0)?;
    db.row_range_mut(4..6)?.copy_from(da.row_range(1..3)?)?;
    // SAFETY: each row holds `cols` elements.
    unsafe {
        add::launch(
            &gpu.library(),
            linear(cols),
            da.row(0)?,
            da.row(6)?,
            db.row_mut(6)?,
            cols,
        )
    }?;
    let mut want = b.clone();
    want.row_mut(2).fill(4.0);
    for r in 0..2 {
        want.row_mut(4 + r).assign(&a.row(1 + r));
    }
    let sum = &a.row(0) + &a.row(6);
    want.row_mut(6).assign(&sum);
    check_abs(
        "rows filled, copied and launched on",
        &crate::common::check::logical(&db.to_array()?.view()),
        &crate::common::check::logical(&want.view()),
        0.0,
    )?;
    check_abs("row 4", &db.row(4)?.to_vec()?, &a.row(1).to_vec(), 0.0)?;
    db.copy_from(&da)?;
    check_abs(
        "the whole matrix copied",
        &crate::common::check::logical(&db.to_array()?.view()),
        &crate::common::check::logical(&a.view()),
        0.0,
    )
}

/// Ranges past the end, reversed ranges, lengths that differ, rows past the last: each an error
/// that says so, and nothing written.
fn errors(gpu: &Gpu) -> Check {
    let mut v = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0])?;
    for (what, result) in [
        ("slice 2..5 of 4", v.slice(2..5).map(|_| ())),
        ("slice 5.. of 4", v.slice(5..).map(|_| ())),
        ("slice_mut ..=4 of 4", v.slice_mut(..=4).map(|_| ())),
        ("split_at_mut 5 of 4", v.split_at_mut(5).map(|_| ())),
    ] {
        match result {
            Err(Error::InvalidArgument { detail, .. }) if detail.contains("4 elements") => {}
            other => {
                return Err(
                    format!("{what}: expected InvalidArgument naming the length, got {other:?}").into(),
                );
            }
        }
    }
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = v.slice(3..2).map(|_| ());
    if !matches!(reversed, Err(Error::InvalidArgument { .. })) {
        return Err(format!("a reversed range: {reversed:?}").into());
    }
    expect_shape_mismatch(
        "copy_from_host of 3 into 4",
        v.copy_from_host(&[0.0; 3]),
        &[4],
        &[3],
    )?;
    let other = gpu.upload(&[9.0f32; 3])?;
    expect_shape_mismatch("copy_from 3 into 4", v.copy_from(&other), &[4], &[3])?;
    expect_shape_mismatch(
        "copy_from 3 into 2",
        v.slice_mut(..2)?.copy_from(&other),
        &[2],
        &[3],
    )?;
    let mut out = [0.0f32; 3];
    expect_shape_mismatch(
        "copy_to_host of 4 into 3",
        v.slice(..)?.copy_to_host(&mut out),
        &[4],
        &[3],
    )?;
    check_abs("nothing written", &v.to_vec()?, &[1.0, 2.0, 3.0, 4.0], 0.0)?;
    let mut m = gpu.zeros_matrix(3, 2)?;
    if m.row(3).is_ok() || m.row_mut(usize::MAX).is_ok() || m.row_range(2..4).is_ok() {
        return Err("a row past the last was accepted".into());
    }
    let n = gpu.zeros_matrix(2, 3)?;
    expect_shape_mismatch(
        "copy_from a 2 x 3 into a 3 x 2",
        m.copy_from(&n),
        &[3, 2],
        &[2, 3],
    )
}

/// The planted bug: `add` told `n = 8` on views of 6 elements of 10-element buffers. The
/// simulator reports the access at index 6 of the 6-element view (on a GPU it would silently
/// read and write the buffers' next elements).
fn overrun(gpu: &Gpu) -> Check {
    let (a, b) = (gpu.upload(&[1.0f32; 10])?, gpu.upload(&[2.0f32; 10])?);
    let mut c = gpu.upload(&[0.0f32; 10])?;
    // SAFETY: it is not safe, on purpose: the simulator checks it.
    let result = unsafe {
        add::launch(
            &gpu.library(),
            linear(8),
            a.slice(..6)?,
            b.slice(2..8)?,
            c.slice_mut(4..)?,
            8,
        )
    };
    match result {
        Err(Error::Simulator(e)) => match &e.violation {
            Violation::OutOfBounds {
                buffer,
                index: 6,
                len: 6,
                access: Access::Read,
                ..
            } if buffer == "a" => Ok(()),
            other => Err(format!("expected a read of a[6] past its 6 elements, got {other:?}").into()),
        },
        other => Err(format!("expected the simulator to report the overrun, got {other:?}").into()),
    }
}

/// A copy on stream B from a buffer stream A is still writing (a naive matmul of milliseconds):
/// B's copy must wait for A's kernel, and A's later write must wait for B's copy.
fn copy_across_streams(gpu: &Gpu, rng: &mut StdRng, size: usize) -> Check {
    let (sa, sb) = (gpu.stream()?, gpu.stream()?);
    let a = crate::common::random_matrix(rng, size, size);
    let (da, db) = (sa.upload_matrix(&a)?, sa.upload_matrix(&a)?);
    sa.synchronize()?;
    for round in 0..3 {
        let mut c = poisoned_matrix(&sa, size, size)?;
        let mut copy = poisoned_matrix(&sb, size, size)?;
        sa.synchronize()?;
        sb.synchronize()?;
        sa.matmul_into(&da, &db, &mut c, gpukern::MatmulAlgorithm::Naive)?;
        copy.copy_from(&c)?; // queued on B, ordered after A's product
        c.fill(f32::NAN)?; // queued on A, ordered after B's copy
        let got = copy.as_vec().to_vec()?;
        if got.iter().any(|v| v.is_nan()) {
            return Err(format!(
                "round {round}: the copy on B saw NaN: it ran before A's product or after A's fill"
            )
            .into());
        }
    }
    Ok(())
}

/// A view of a simulator buffer passed to a CUDA launch, and a copy between the two.
fn wrong_device(gpu: &Gpu) -> Check {
    let sim = Gpu::simulator();
    let a = sim.upload(&[1.0f32; 4])?;
    let mut c = gpu.upload(&[0.0f32; 4])?;
    // SAFETY: refused before launching.
    let launched = unsafe {
        add::launch(
            &gpu.library(),
            linear(4),
            a.slice(..)?,
            a.slice(..)?,
            c.slice_mut(..)?,
            4,
        )
    };
    expect_wrong_device("a simulator view in a CUDA launch", launched)?;
    expect_wrong_device("a copy from a simulator view", c.copy_from(a.slice(..)?))
}

/// Fails unless every element of `parts` is still NaN.
fn expect_untouched(what: &str, parts: &[&[f32]]) -> Check {
    match parts.iter().flat_map(|p| p.iter()).find(|v| !v.is_nan()) {
        Some(v) => Err(format!("{what}: written ({v})").into()),
        None => Ok(()),
    }
}

/// Fails unless `got == want` element for element.
fn expect_same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Check {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        _ if got.len() != want.len() => {
            Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into())
        }
        Some(i) => Err(format!("{what}: element {i} is {:?}, expected {:?}", got[i], want[i]).into()),
        None => Ok(()),
    }
}
