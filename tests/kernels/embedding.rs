//! The embedding gather (i32 and i64 ids) against `cpu::embedding_rows`: per backend, both
//! algorithms on ragged and Llama-sized tables (`embedding::TxVxH`: tokens, vocabulary, hidden),
//! bit for bit; the kernels' own guard on ids no host check saw (`embedding::guard`: zeros, no
//! read outside the table, which the simulator would report); the checks and errors
//! (`errors::embedding`); the free function (`global::embedding`).

use gpukern::{EmbeddingAlgorithm, Error, Gpu, TokenIdElement, bf16, cpu};
use libtest_mimic::Trial;
use ndarray::Array2;
use rand::Rng;
use rand::rngs::StdRng;

use crate::common::check::*;
use crate::common::random_vec;
use crate::common::trial::{Target, global_trial, trial};

/// Simulator shapes `(tokens, vocab, hidden)`: one token, rows of one vector, rows off the vector
/// width (the tutorial), more chunks than one sweep of a block, rows of more chunks than a
/// block's threads (257: the rows kernel steps from chunk to chunk, crossing rows mid-block).
const SIM_SHAPES: &[(usize, usize, usize)] = &[(1, 5, 8), (7, 3, 12), (9, 50, 264), (5, 7, 2056)];

/// CUDA shapes: a 32000 x 4096 table (the decoder: a vocabulary of 32000, Llama-3-8B's
/// hidden size) at 1, 8 and 4096 tokens, 63 and 64 (the default's two sides of
/// `embedding::SMALL_OUTPUTS`), a ragged one.
const CUDA_SHAPES: &[(usize, usize, usize)] = &[
    (1, 32_000, 4096),
    (8, 32_000, 4096),
    (63, 32_000, 4096),
    (64, 32_000, 4096),
    (4096, 32_000, 4096),
    (77, 1000, 1001),
];

/// Every trial of the family.
pub(crate) fn trials(sim: &Target, cuda: &Target) -> Vec<Trial> {
    let mut trials = backend_trials(sim, SIM_SHAPES);
    trials.extend(backend_trials(cuda, CUDA_SHAPES));
    trials.push(global_trial("embedding", global));
    trials
}

fn backend_trials(target: &Target, shapes: &'static [(usize, usize, usize)]) -> Vec<Trial> {
    let mut trials = vec![
        trial(target, "embedding::guard::i32", |gpu, _| guard::<i32>(gpu)),
        trial(target, "embedding::guard::i64", |gpu, _| guard::<i64>(gpu)),
        trial(target, "errors::embedding", |gpu, _| errors(gpu)),
    ];
    for &(tokens, vocab, hidden) in shapes {
        trials.push(trial(
            target,
            &format!("embedding::i32::{tokens}x{vocab}x{hidden}"),
            move |gpu, rng| shape::<i32>(gpu, rng, (tokens, vocab, hidden)),
        ));
        trials.push(trial(
            target,
            &format!("embedding::i64::{tokens}x{vocab}x{hidden}"),
            move |gpu, rng| shape::<i64>(gpu, rng, (tokens, vocab, hidden)),
        ));
    }
    trials
}

/// A random `vocab x hidden` bf16 table on the device, and its values.
fn table(
    gpu: &Gpu,
    rng: &mut StdRng,
    vocab: usize,
    hidden: usize,
) -> gpukern::Result<(gpukern::DeviceMatrix<bf16>, Vec<bf16>)> {
    let v: Vec<bf16> = random_vec(rng, vocab * hidden)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let m = Array2::from_shape_vec((vocab, hidden), v.clone()).map_err(|e| Error::InvalidArgument {
        op: "test",
        detail: e.to_string(),
    })?;
    Ok((gpu.upload_matrix(&m)?, v))
}

/// Fails unless `got` and `want` hold the same bits.
fn same(what: &str, got: &[bf16], want: &[bf16]) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} elements, expected {}", got.len(), want.len()).into());
    }
    match (0..got.len()).find(|&i| got[i].to_bits() != want[i].to_bits()) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: element {i} got {}, expected {}", got[i], want[i]).into()),
    }
}

/// Random ids (the first and last row among them), every algorithm, into poisoned outputs.
fn shape<I: TokenIdElement + TryFrom<i64>>(
    gpu: &Gpu,
    rng: &mut StdRng,
    (tokens, vocab, hidden): (usize, usize, usize),
) -> Check {
    let (dt, t) = table(gpu, rng, vocab, hidden)?;
    let mut wide: Vec<i64> = (0..tokens).map(|_| rng.random_range(0..vocab as i64)).collect();
    wide[0] = vocab as i64 - 1;
    if tokens > 1 {
        wide[1] = 0;
    }
    let ids: Vec<I> = wide.iter().filter_map(|&p| I::try_from(p).ok()).collect();
    let dids = gpu.upload_token_ids(&ids, vocab)?;
    let want = cpu::embedding_rows(&t, hidden, &wide);
    let mut failures = Vec::new();
    for algorithm in EmbeddingAlgorithm::ALL
        .into_iter()
        .chain([EmbeddingAlgorithm::Auto])
    {
        let mut y = gpu.upload_matrix(&Array2::from_elem((tokens, hidden), bf16::NAN))?;
        gpu.embedding_into_with(&dt, &dids, &mut y, algorithm)?;
        let what = format!("embedding {} {tokens}x{vocab}x{hidden}", algorithm.name());
        if let Err(e) = same(&what, &y.as_vec().to_vec()?, &want) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Ids no host check saw (negative, `vocab`, far past it) straight to the kernels: their rows
/// are zeros, the others right, and (in the simulator) no access outside the table is reported.
fn guard<I: TokenIdElement + TryFrom<i64>>(gpu: &Gpu) -> Check {
    let (vocab, hidden) = (4, 16);
    let mut rng = crate::common::rng_for("embedding::guard");
    let (dt, t) = table(gpu, &mut rng, vocab, hidden)?;
    let wide = [2i64, -1, 4, 3, i64::from(i32::MAX), 0];
    let ids: Vec<I> = wide.iter().filter_map(|&p| I::try_from(p).ok()).collect();
    let dids = gpu.upload(&ids)?;
    let want = cpu::embedding_rows(&t, hidden, &wide);
    let mut failures = Vec::new();
    for algorithm in EmbeddingAlgorithm::ALL {
        let mut y = gpu.upload_matrix(&Array2::from_elem((wide.len(), hidden), bf16::NAN))?;
        gpu.embedding_unchecked_with(&dt, &dids, &mut y, algorithm)?;
        if let Err(e) = same(
            &format!("guard {}", algorithm.name()),
            &y.as_vec().to_vec()?,
            &want,
        ) {
            failures.push(e.to_string());
        }
    }
    all_passed(failures)
}

/// Ids out of range, a table of another vocabulary, an output of the wrong shape are refused;
/// no ids give an empty result.
fn errors(gpu: &Gpu) -> Check {
    let mut failures = Vec::new();
    for bad in [-1i64, 10] {
        if !matches!(
            gpu.upload_token_ids(&[0, bad], 10),
            Err(Error::InvalidArgument { .. })
        ) {
            failures.push(format!("id {bad} was accepted for a vocabulary of 10"));
        }
    }
    let mut ids = gpu.upload_token_ids(&[1i32, 2], 10)?;
    if ids.update(&[3, 10]).is_ok() || ids.update(&[1]).is_ok() {
        failures.push("update accepted a bad id or length".into());
    }
    let table = gpu.upload_matrix(&Array2::from_elem((8, 16), bf16::ONE))?;
    if let Err(e) = expect_shape_mismatch("vocab", gpu.embedding(&table, &ids).map(|_| ()), &[8], &[10]) {
        failures.push(e.to_string());
    }
    let ids8 = gpu.upload_token_ids(&[1i64, 2], 8)?;
    let mut wrong = gpu.upload_matrix(&Array2::from_elem((2, 8), bf16::ONE))?;
    if gpu.embedding_into(&table, &ids8, &mut wrong).is_ok() {
        failures.push("an output of the wrong shape was accepted".into());
    }
    let none = gpu.upload_token_ids::<i64>(&[], 8)?;
    if gpu.embedding(&table, &none)?.dim() != (0, 16) {
        failures.push("no ids did not give a 0 x 16 result".into());
    }
    all_passed(failures)
}

/// The free function.
fn global(rng: &mut StdRng) -> Check {
    let (vocab, hidden) = (11, 24);
    let t: Vec<bf16> = random_vec(rng, vocab * hidden)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let ta = Array2::from_shape_vec((vocab, hidden), t.clone()).map_err(|e| e.to_string())?;
    let ids = [3i64, 10, 0, 3];
    let got = gpukern::embedding(&ta, &ids)?;
    let mut failures = Vec::new();
    if let Err(e) = same(
        "gpukern::embedding",
        &got.iter().copied().collect::<Vec<_>>(),
        &cpu::embedding_rows(&t, hidden, &ids),
    ) {
        failures.push(e.to_string());
    }
    if gpukern::embedding(&ta, &[11]).is_ok() {
        failures.push("gpukern::embedding accepted id 11 of a vocabulary of 11".into());
    }
    all_passed(failures)
}
