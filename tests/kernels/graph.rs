//! CUDA graphs (`Gpu::capture`, `Gpu::capture_with`, `Graph::launch`) on each backend
//! (`{sim,cuda}::graph::*`): a replayed softmax + matmul equals the same calls made directly, a
//! chain of 100 kernels replays in order, a capture runs nothing, and what a capture cannot hold
//! (allocations, host copies, synchronisation, replaced buffers) is an `Error::Capture` after
//! which the `Gpu` still works.

use gpukern::ops::matmul::{FastPlan, FastTile};
use gpukern::{Error, Gpu, MatmulAlgorithm};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::trial::{Target, trial};
use crate::common::{random_matrix, random_vec};

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = Vec::new();
    for (target, (m, k, n), len) in [(sim, (19, 37, 23), 1000), (cuda, (300, 517, 129), 1024)] {
        trials.push(trial(target, "graph::replay_equals_direct", move |gpu, rng| {
            replay_equals_direct(&own(gpu)?, rng, (m, k, n))
        }));
        trials.push(trial(target, "graph::chain_of_100", move |gpu, rng| {
            chain_of_100(&own(gpu)?, rng, len)
        }));
        trials.push(trial(target, "graph::capture_runs_nothing", move |gpu, rng| {
            capture_runs_nothing(&own(gpu)?, rng, len)
        }));
        trials.push(trial(target, "graph::errors_inside_capture", |gpu, rng| {
            errors_inside_capture(&own(gpu)?, rng)
        }));
        trials.push(trial(
            target,
            "graph::first_launch_inside_capture",
            move |gpu, rng| first_launch_inside_capture(&own(gpu)?, rng, len),
        ));
    }
    trials
}

/// A `Gpu` of the trial's own on CUDA (a context and stream of its own): a capture records
/// whatever is queued on its stream meanwhile, and the other trials share the harness's `Gpu`
/// from other threads (as `Gpu::capture` documents, a capture wants its `Gpu` to itself). The
/// simulator's capture is per thread: the shared one is fine.
fn own(gpu: &Gpu) -> gpukern::Result<Gpu> {
    match gpu.ordinal() {
        Some(ordinal) => Gpu::new(ordinal),
        None => Ok(gpu.clone()),
    }
}

/// Not the trial's concern: the replay and the direct calls run the same kernels on the same
/// data, so they must agree bit for bit.
const SAME: f64 = 0.0;

/// `softmax_into` then `matmul_into` (tiled) captured and replayed twice, against the same calls
/// made directly.
fn replay_equals_direct(gpu: &Gpu, rng: &mut StdRng, (m, k, n): (usize, usize, usize)) -> Check {
    let x = gpu.upload_matrix(&random_matrix(rng, m, k))?;
    let w = gpu.upload_matrix(&random_matrix(rng, k, n))?;
    let mut y = poisoned_matrix(gpu, m, k)?;
    let mut z = poisoned_matrix(gpu, m, n)?;
    gpu.softmax_into(&x, &mut y, 0.7)?;
    gpu.matmul_into(&y, &w, &mut z, MatmulAlgorithm::Tiled)?;
    let want = z.as_vec().to_vec()?;

    let buffers = (x, w, poisoned_matrix(gpu, m, k)?, poisoned_matrix(gpu, m, n)?);
    let mut graph = gpu.capture_with(buffers, |g, (x, w, y, z)| {
        g.softmax_into(x, y, 0.7)?;
        g.matmul_into(y, w, z, MatmulAlgorithm::Tiled)
    })?;
    let mut failures = Vec::new();
    for replay in 1..=2 {
        graph.launch()?;
        let got = graph.buffers().3.as_vec().to_vec()?;
        if let Err(e) = check_abs(&format!("replay {replay}, {m}x{k}x{n}"), &got, &want, SAME) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// 100 `increment_by_one`s captured by borrowing the buffer, replayed twice: `x + 200`.
fn chain_of_100(gpu: &Gpu, rng: &mut StdRng, len: usize) -> Check {
    let x = random_vec(rng, len);
    let mut dx = gpu.upload(&x)?;
    {
        let mut graph = gpu.capture(|g| (0..100).try_for_each(|_| g.increment_by_one(&mut dx)))?;
        graph.launch()?;
        graph.launch()?;
    }
    let want: Vec<f32> = x.iter().map(|&v| (0..200).fold(v, |acc, _| acc + 1.0)).collect();
    check_abs("100 increments replayed twice", &dx.to_vec()?, &want, SAME)
}

/// A capture records without running: the buffer is unchanged until the first launch.
fn capture_runs_nothing(gpu: &Gpu, rng: &mut StdRng, len: usize) -> Check {
    let x = random_vec(rng, len);
    let mut graph = gpu.capture_with(gpu.upload(&x)?, |g, dx| g.increment_by_one(dx))?;
    check_abs("after capture", &graph.buffers().to_vec()?, &x, SAME)?;
    graph.launch()?;
    let once: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    check_abs("after one launch", &graph.into_buffers().to_vec()?, &once, SAME)
}

/// Whether `result` is an `Error::Capture` whose message contains `needle`.
fn expect_capture<T>(what: &str, result: gpukern::Result<T>, needle: &str, failures: &mut Vec<String>) {
    match result {
        Err(Error::Capture { op, detail }) if format!("{op}: {detail}").contains(needle) => {}
        Err(e) => failures.push(format!(
            "{what}: expected Error::Capture naming `{needle}`, got {e}"
        )),
        Ok(_) => failures.push(format!("{what}: expected Error::Capture, got Ok")),
    }
}

/// Each thing a capture cannot hold is refused with `Error::Capture`; an error the closure
/// returns comes back as is; a replaced buffer stops the launch; and afterwards the `Gpu` still
/// computes and captures.
fn errors_inside_capture(gpu: &Gpu, rng: &mut StdRng) -> Check {
    let n = 64;
    let x = random_vec(rng, n);
    let dx = gpu.upload(&x)?;
    let mut failures = Vec::new();
    let f = &mut failures;
    expect_capture("upload", gpu.capture(|g| g.upload(&x).map(drop)), "upload", f);
    expect_capture("zeros", gpu.capture(|g| g.zeros(n).map(drop)), "zeros", f);
    expect_capture(
        "add (new buffer)",
        gpu.capture(|g| g.add(&dx, &dx).map(drop)),
        "allocation",
        f,
    );
    expect_capture("to_vec", gpu.capture(|_| dx.to_vec().map(drop)), "to_vec", f);
    let mut host = vec![0.0; n];
    expect_capture(
        "copy_to_host",
        gpu.capture(|_| dx.copy_to_host(&mut host)),
        "copy_to_host",
        f,
    );
    expect_capture("synchronize", gpu.capture(|g| g.synchronize()), "synchronize", f);
    expect_capture(
        "nested capture",
        gpu.capture(|g| g.capture(|_| Ok(())).map(drop)),
        "inside a capture",
        f,
    );
    // A fast plan that splits k needs a temporary buffer of partial products.
    let (m, k, nn) = (8, 512, 8);
    let a = gpu.upload_matrix(&random_matrix(rng, m, k))?;
    let b = gpu.upload_matrix(&random_matrix(rng, k, nn))?;
    let mut c = gpu.zeros_matrix(m, nn)?;
    let split = FastPlan {
        tile: FastTile::Small,
        slices: 2,
    };
    expect_capture(
        "k-split matmul",
        gpu.capture(|g| g.matmul_fast_into(&a, &b, &mut c, split)),
        "splits k",
        f,
    );
    // The closure's own error comes back unchanged.
    let mut short = gpu.zeros(n - 1)?;
    match gpu.capture(|g| g.add_into(&dx, &dx, &mut short)) {
        Err(Error::ShapeMismatch { .. }) => {}
        other => f.push(format!(
            "shape error inside a capture: expected ShapeMismatch, got {:?}",
            other.err()
        )),
    }
    // A held buffer replaced after the capture: the launch refuses.
    let mut graph = gpu.capture_with(gpu.upload(&x)?, |g, v| g.increment_by_one(v))?;
    *graph.buffers_mut() = gpu.upload(&x)?;
    expect_capture("replaced buffer", graph.launch(), "replaced", f);
    drop(graph);
    // The Gpu still works, directly and in a new graph.
    let sum = gpu.add(&dx, &dx)?.to_vec()?;
    let want: Vec<f32> = x.iter().map(|v| v + v).collect();
    if let Err(e) = check_abs("add after the refusals", &sum, &want, SAME) {
        f.push(e.to_string());
    }
    let mut out = gpu.zeros(n)?;
    gpu.capture(|g| g.add_into(&dx, &dx, &mut out))?.launch()?;
    if let Err(e) = check_abs("graph after the refusals", &out.to_vec()?, &want, SAME) {
        f.push(e.to_string());
    }
    all_passed(failures)
}

/// A kernel launched for the first time on its `Gpu` inside a capture: on CUDA its module is loaded
/// (JIT-compiled) then, on a thread of its own, and the replay computes what the direct call does.
fn first_launch_inside_capture(gpu: &Gpu, rng: &mut StdRng, len: usize) -> Check {
    let (a, b) = (random_vec(rng, len), random_vec(rng, len));
    let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
    let mut dc = poisoned_vec(gpu, len)?;
    {
        let mut graph = gpu.capture(|g| g.add_into(&da, &db, &mut dc))?;
        graph.launch()?;
    }
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    check_abs(
        "the add first launched inside a capture, replayed",
        &dc.to_vec()?,
        &want,
        SAME,
    )
}
