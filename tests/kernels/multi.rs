//! Several GPUs (`gpukern::gpus`, `DeviceVec::copy_to`, `GpuGroup::all_reduce_sum`): on
//! simulators (`sim::multi::*`: a group of three, the plain sum, the checks), on CUDA device 0
//! alone (`cuda::multi::copy_same_device`, `cuda::multi::one_gpu_group`), and on two or more
//! devices (`cuda-2gpus::multi::peer_copy`, `cuda-2gpus::multi::all_reduce`: ignored, never
//! passed, with fewer than two GPUs or without libnccl, the reason printed on stderr; their own
//! prefix tells a GPU check that a skip on a one-GPU machine is no failure).

use gpukern::{Gpu, GpuGroup};
use libtest_mimic::Trial;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, trial};

/// The prefix of the trials that need two GPUs (`scripts/gpu-check.sh` accepts them as skipped
/// on a machine of fewer).
const TWO_GPUS: &str = "cuda-2gpus";

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = vec![
        trial(sim, "multi::all_reduce", |_, rng| {
            all_reduce(&GpuGroup::new(vec![Gpu::simulator(); 3])?, rng, 1001)
        }),
        trial(sim, "multi::copy_to", |gpu, rng| copy_between(gpu, gpu, rng, 333)),
        trial(sim, "multi::group_checks", |gpu, _| group_checks(gpu)),
        trial(cuda, "multi::copy_same_device", |gpu, rng| {
            copy_between(gpu, &Gpu::new(gpu.ordinal().unwrap_or(0))?, rng, (1 << 20) + 3)
        }),
        trial(cuda, "multi::one_gpu_group", |gpu, rng| {
            all_reduce(&GpuGroup::new(vec![gpu.clone()])?, rng, 4099)
        }),
    ];
    // Two or more devices: counted once, so that the trials are ignored (not passed) without, the
    // reason on stderr (the harness's `--list` output on stdout must stay a list).
    let (devices, why) = match (&cuda.gpu, cuda.ignored) {
        (Ok(_), false) => match gpukern::gpus() {
            Ok(g) if g.len() >= 2 => (Some(g.len()), None),
            Ok(g) => (None, Some(format!("{} GPU(s)", g.len()))),
            Err(e) => (None, Some(e.to_string())),
        },
        _ => (None, Some("no CUDA device".to_string())),
    };
    let nccl_available = gpukern::multi::nccl_available();
    if let Some(why) = &why {
        eprintln!("{TWO_GPUS}:: trials skipped (ignored): they need two GPUs, and here: {why}");
    } else if !nccl_available {
        eprintln!("{TWO_GPUS}::multi::all_reduce skipped (ignored): libnccl cannot be loaded");
    }
    let two = Target {
        prefix: TWO_GPUS,
        gpu: cuda.gpu.clone(),
        ignored: devices.is_none(),
    };
    trials.push(trial(&two, "multi::peer_copy", |_, rng| {
        let gpus = gpukern::gpus()?;
        copy_between(&gpus[0], &gpus[1], rng, (1 << 22) + 5)?;
        copy_between(&gpus[1], &gpus[0], rng, 777)
    }));
    let nccl = Target {
        prefix: TWO_GPUS,
        gpu: cuda.gpu.clone(),
        ignored: devices.is_none() || !nccl_available,
    };
    trials.push(trial(&nccl, "multi::all_reduce", |_, rng| {
        let group = GpuGroup::all()?;
        all_reduce(&group, rng, (1 << 20) + 7)?;
        // Twice: the second call reuses the communicators.
        all_reduce(&group, rng, 1000)
    }));
    trials
}

/// `all_reduce_sum` of one random vector per `Gpu` against the f64 sum; every part must hold it.
fn all_reduce(group: &GpuGroup, rng: &mut StdRng, len: usize) -> Check {
    let inputs: Vec<Vec<f32>> = (0..group.len()).map(|_| random_vec(rng, len)).collect();
    let want: Vec<f32> = (0..len)
        .map(|i| inputs.iter().map(|v| f64::from(v[i])).sum::<f64>() as f32)
        .collect();
    let mut parts = group
        .gpus()
        .iter()
        .zip(&inputs)
        .map(|(gpu, v)| gpu.upload(v))
        .collect::<gpukern::Result<Vec<_>>>()?;
    group.all_reduce_sum(&mut parts)?;
    // f32 sums of `group.len()` terms in [-1, 1), in whatever order NCCL adds them.
    let tol = group.len() as f64 * 2.0 * f64::from(f32::EPSILON);
    let mut failures = Vec::new();
    for (rank, part) in parts.iter().enumerate() {
        let what = format!("rank {rank} of {}, len {len}", group.len());
        if let Err(e) = check_abs(&what, &part.to_vec()?, &want, tol) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// `copy_to` from `from` to `to`, then a kernel on the copy, and the source unchanged.
fn copy_between(from: &Gpu, to: &Gpu, rng: &mut StdRng, len: usize) -> Check {
    let x = random_vec(rng, len);
    let src = from.upload(&x)?;
    let mut copy = src.copy_to(to)?;
    to.increment_by_one(&mut copy)?;
    let want: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    check_abs("copy, then +1 on the other Gpu", &copy.to_vec()?, &want, 0.0)?;
    check_abs("the source", &src.to_vec()?, &x, 0.0)
}

/// What a group refuses: no Gpu, a wrong count of parts, unequal lengths, another device's part.
fn group_checks(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    if GpuGroup::new(Vec::new()).is_ok() {
        failures.push("an empty group was accepted".to_string());
    }
    let group = GpuGroup::new(vec![gpu.clone(), gpu.clone()])?;
    let mut one = vec![gpu.zeros(4)?];
    if let Err(e) = expect_shape_mismatch(
        "one part for two Gpus",
        group.all_reduce_sum(&mut one),
        &[1],
        &[2],
    ) {
        failures.push(e.to_string());
    }
    let mut ragged = vec![gpu.zeros(4)?, gpu.zeros(5)?];
    if let Err(e) = expect_shape_mismatch("unequal lengths", group.all_reduce_sum(&mut ragged), &[4], &[5]) {
        failures.push(e.to_string());
    }
    if let Ok(cuda) = Gpu::new(0) {
        if GpuGroup::new(vec![gpu.clone(), cuda.clone()]).is_ok() {
            failures.push("a group of a simulator and a CUDA device was accepted".to_string());
        }
        let mut foreign = vec![cuda.zeros(4)?, gpu.zeros(4)?];
        if let Err(e) = expect_wrong_device("a CUDA part", group.all_reduce_sum(&mut foreign)) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}
