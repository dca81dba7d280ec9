//! The planted bugs and twins of `gpukern-device/checks/hopper` as the GPU runs them: for each,
//! the kernel, the rule it breaks (the simulator's name for it), its operands (the same as
//! `gpukern-device/tests/sim_hopper.rs` gives it), and what the twin writes.

use std::fmt;

use cudarc::driver::sys::CUtensorMapDataType::{
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
};
use gpukern_device::sim::Rule;
use gpukern_device::{bf16, tma::swizzle_128b};
use gpukern_device_hopper_checks::{cluster, mbarrier, multicast, named, registers, tma, wgmma};

use crate::cuda::{Device, Map, encode};

/// How a plant is launched, and what its twin writes.
pub enum Setup {
    /// `(x, y)`, `x = 1, 2, ..., 128`: `y = 2 x`.
    Bulk,
    /// `(map, x, rows, cols, y)` on the `rows x cols` matrix `x[r][c] = r + c / 64`: the row
    /// sums of the box; the map encodes the tensor as the kernel describes it (`swapped`: the
    /// dimensions exchanged).
    RowSum { rows: usize, cols: usize, swapped: bool },
    /// `(map, y, rows, cols)`: `y[r][c] = 1000 r + c`.
    Store { rows: usize, cols: usize },
    /// `(a, b, c)`: `C = A B` of 64 x 64 bf16.
    Product,
    /// `(a, b, c, m)`: the first `m` rows of `C`.
    Rows { m: usize },
    /// `(maps, a, b, c)`, the maps of `A` and `B`: `C`.
    TmaProduct,
    /// `(a, b, c)`, `A` 64 x 256 and `B` 256 x 64 as four pairs of swizzled tiles: `C`.
    Ring,
    /// `(y)`, one block of `threads` threads and `shared` bytes of dynamic shared memory:
    /// `y[t] = t`.
    Indices { threads: u32, shared: u32 },
    /// `(y)`, two blocks in one cluster: `y[0] = expect`.
    Cluster { expect: f32 },
    /// `(maps, a, b, c)`, two blocks in one cluster, `A` 128 x 256 and `B` 256 x 64 with their
    /// maps (boxes of 64 x 64 and 32 x 64): `C = A B`, 128 x 64.
    Multicast,
}

/// One plant (or twin).
pub struct Plant {
    /// Its name on the command line.
    pub name: &'static str,
    /// The rule it breaks (for a twin: the rule its plant breaks).
    pub rule: &'static str,
    /// The entry point.
    pub kernel: &'static str,
    pub setup: Setup,
}

/// A plant: `name`, `rule`, `kernel`, `setup`.
const fn plant(name: &'static str, rule: Rule, kernel: &'static str, setup: Setup) -> Plant {
    Plant {
        name,
        rule: rule_name(rule),
        kernel,
        setup,
    }
}

/// The rule's name as a `const` (`Rule::name` is not `const`).
const fn rule_name(rule: Rule) -> &'static str {
    match rule {
        Rule::MbarrierArrivals => "mbarrier-arrivals",
        Rule::MbarrierTransactions => "mbarrier-tx",
        Rule::MbarrierDeadlock => "mbarrier-deadlock",
        Rule::MbarrierPhaseReuse => "mbarrier-phase-reuse",
        Rule::MbarrierUninitialized => "mbarrier-uninitialized",
        Rule::MbarrierInvalidated => "mbarrier-invalidated",
        Rule::MbarrierInit => "mbarrier-init",
        Rule::TmaBounds => "tma-bounds",
        Rule::TmaAlignment => "tma-alignment",
        Rule::TensorMap => "tensor-map",
        Rule::TmaEarlyAccess => "tma-early-access",
        Rule::ProxyFence => "proxy-fence",
        Rule::WgmmaAccumulators => "wgmma-accumulators",
        Rule::WgmmaOperands => "wgmma-operands",
        Rule::BulkStoreSource => "bulk-store-source",
        Rule::WgmmaDescriptor => "wgmma-descriptor",
        Rule::WgmmaOrder => "wgmma-order",
        Rule::Setmaxnreg => "setmaxnreg",
        Rule::ClusterPublish => "cluster-publish",
        Rule::ClusterExit => "cluster-exit",
        Rule::NamedBarrier => "named-barrier",
    }
}

/// Every plant, then every twin (`*_twin`).
pub const PLANTS: &[Plant] = &[
    plant(
        "mbarrier_arrivals_planted",
        Rule::MbarrierArrivals,
        "mbarrier_arrivals_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_tx_over_planted",
        Rule::MbarrierTransactions,
        "mbarrier_tx_over_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_tx_under_planted",
        Rule::MbarrierTransactions,
        "mbarrier_tx_under_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_deadlock_planted",
        Rule::MbarrierDeadlock,
        "mbarrier_deadlock_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_phase_reuse_planted",
        Rule::MbarrierPhaseReuse,
        "mbarrier_phase_reuse_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_uninit_planted",
        Rule::MbarrierUninitialized,
        "mbarrier_uninit_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_inval_planted",
        Rule::MbarrierInvalidated,
        "mbarrier_inval_planted",
        Setup::Bulk,
    ),
    plant(
        "mbarrier_init_planted",
        Rule::MbarrierInit,
        "mbarrier_init_planted",
        Setup::Bulk,
    ),
    plant(
        "tma_bounds_planted",
        Rule::TmaBounds,
        "tma_bounds_planted",
        Setup::RowSum {
            rows: 16,
            cols: 32,
            swapped: true,
        },
    ),
    plant(
        "tma_alignment_planted",
        Rule::TmaAlignment,
        "tma_alignment_planted",
        Setup::RowSum {
            rows: 32,
            cols: 32,
            swapped: false,
        },
    ),
    plant(
        "tensor_map_planted",
        Rule::TensorMap,
        "tma_rowsum_twin",
        Setup::RowSum {
            rows: 32,
            cols: 30,
            swapped: false,
        },
    ),
    plant(
        "tma_early_planted",
        Rule::TmaEarlyAccess,
        "tma_early_planted",
        Setup::RowSum {
            rows: 32,
            cols: 32,
            swapped: false,
        },
    ),
    plant(
        "tma_store_unfenced_planted",
        Rule::ProxyFence,
        "tma_store_unfenced_planted",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "tma_store_reuse_planted",
        Rule::BulkStoreSource,
        "tma_store_reuse_planted",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "tma_store_named_reuse_planted",
        Rule::BulkStoreSource,
        "tma_store_named_reuse_planted",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "wgmma_proxy_planted",
        Rule::ProxyFence,
        "wgmma_proxy_planted",
        Setup::Product,
    ),
    plant(
        "wgmma_accumulators_planted",
        Rule::WgmmaAccumulators,
        "wgmma_accumulators_planted",
        Setup::Product,
    ),
    plant(
        "wgmma_operands_planted",
        Rule::WgmmaOperands,
        "wgmma_operands_planted",
        Setup::Ring,
    ),
    plant(
        "wgmma_descriptor_planted",
        Rule::WgmmaDescriptor,
        "wgmma_descriptor_planted",
        Setup::TmaProduct,
    ),
    plant(
        "wgmma_order_planted",
        Rule::WgmmaOrder,
        "wgmma_order_planted",
        Setup::Rows { m: 40 },
    ),
    plant(
        "registers_planted",
        Rule::Setmaxnreg,
        "registers_planted",
        Setup::Indices {
            threads: registers::THREADS,
            shared: 0,
        },
    ),
    plant(
        "cluster_publish_planted",
        Rule::ClusterPublish,
        "cluster_publish_planted",
        Setup::Cluster { expect: 7.0 },
    ),
    plant(
        "cluster_exit_planted",
        Rule::ClusterExit,
        "cluster_exit_planted",
        Setup::Cluster { expect: 2.0 },
    ),
    plant(
        "named_barrier_planted",
        Rule::NamedBarrier,
        "named_barrier_planted",
        Setup::Indices {
            threads: named::THREADS,
            shared: named::SHARED_BYTES,
        },
    ),
    plant(
        "multicast_release_planted",
        Rule::WgmmaOperands,
        "multicast_release_planted",
        Setup::Multicast,
    ),
    plant(
        "multicast_drain_planted",
        Rule::ClusterExit,
        "multicast_drain_planted",
        Setup::Multicast,
    ),
    plant(
        "multicast_publish_planted",
        Rule::MbarrierUninitialized,
        "multicast_publish_planted",
        Setup::Multicast,
    ),
    plant("bulk_twin", Rule::MbarrierArrivals, "bulk_twin", Setup::Bulk),
    plant(
        "bulk_inval_twin",
        Rule::MbarrierInvalidated,
        "bulk_inval_twin",
        Setup::Bulk,
    ),
    plant(
        "tma_rowsum_twin",
        Rule::TmaBounds,
        "tma_rowsum_twin",
        Setup::RowSum {
            rows: 16,
            cols: 32,
            swapped: false,
        },
    ),
    plant(
        "tma_store_twin",
        Rule::ProxyFence,
        "tma_store_twin",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "tma_store_reuse_twin",
        Rule::BulkStoreSource,
        "tma_store_reuse_twin",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "tma_store_named_reuse_twin",
        Rule::BulkStoreSource,
        "tma_store_named_reuse_twin",
        Setup::Store { rows: 20, cols: 24 },
    ),
    plant(
        "wgmma_stores_twin",
        Rule::ProxyFence,
        "wgmma_stores_twin",
        Setup::Product,
    ),
    plant(
        "wgmma_async_twin",
        Rule::WgmmaAccumulators,
        "wgmma_async_twin",
        Setup::Product,
    ),
    plant(
        "wgmma_ring_twin",
        Rule::WgmmaOperands,
        "wgmma_ring_twin",
        Setup::Ring,
    ),
    plant(
        "wgmma_tma_twin",
        Rule::WgmmaDescriptor,
        "wgmma_tma_twin",
        Setup::TmaProduct,
    ),
    plant(
        "wgmma_rows_twin",
        Rule::WgmmaOrder,
        "wgmma_rows_twin",
        Setup::Rows { m: 40 },
    ),
    plant(
        "registers_twin",
        Rule::Setmaxnreg,
        "registers_twin",
        Setup::Indices {
            threads: registers::THREADS,
            shared: 0,
        },
    ),
    plant(
        "cluster_publish_twin",
        Rule::ClusterPublish,
        "cluster_publish_twin",
        Setup::Cluster { expect: 7.0 },
    ),
    plant(
        "cluster_exit_twin",
        Rule::ClusterExit,
        "cluster_exit_twin",
        Setup::Cluster { expect: 2.0 },
    ),
    plant(
        "named_barrier_twin",
        Rule::NamedBarrier,
        "named_barrier_twin",
        Setup::Indices {
            threads: named::THREADS,
            shared: named::SHARED_BYTES,
        },
    ),
    plant(
        "multicast_ring_twin",
        Rule::WgmmaOperands,
        "multicast_ring_twin",
        Setup::Multicast,
    ),
];

/// What happened.
pub enum Outcome {
    /// The kernel ran and wrote what the twin writes.
    Ok,
    /// It ran and wrote something else (the first difference).
    Wrong(String),
    /// A CUDA error (what failed).
    Cuda(String),
    /// The driver refused the tensor map.
    Refused(String),
}

impl Outcome {
    /// The process's exit status for it.
    pub fn status(&self) -> u8 {
        match self {
            Outcome::Ok => 0,
            Outcome::Wrong(_) => 1,
            Outcome::Cuda(_) => 2,
            Outcome::Refused(_) => 3,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok => f.write_str("ok (the twin's results)"),
            Outcome::Wrong(d) => write!(f, "wrong-result ({d})"),
            Outcome::Cuda(e) => write!(f, "cuda-error ({e})"),
            Outcome::Refused(e) => write!(f, "map-refused ({e})"),
        }
    }
}

/// Runs `plant` on device 0.
pub fn run(plant: &Plant) -> Outcome {
    match Device::open().and_then(|d| launch(&d, plant)) {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Cuda(e),
    }
}

/// `got` against `want`: the first element that differs.
fn compare(got: &[f32], want: &[f32]) -> Outcome {
    match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        None => Outcome::Ok,
        Some(i) => Outcome::Wrong(format!("element {i} is {}, want {}", got[i], want[i])),
    }
}

/// `A`, `B` (64 x 64 bf16) and `C = A B`, as the simulator's tests give them.
fn operands() -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let a: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 7 + i / 64) % 9) as f32 - 4.0)
        .collect();
    let b: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 5 + i / 64 * 3) % 7) as f32 - 3.0)
        .collect();
    let c = (0..64 * 64)
        .map(|i| (0..64).map(|k| a[i / 64 * 64 + k] * b[k * 64 + i % 64]).sum())
        .collect();
    let to = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect();
    (to(a), to(b), c)
}

/// The ring's operands: four pairs of swizzled tiles of `A` (64 x 256) and `B` (256 x 64), and
/// `C = A B`.
fn ring_operands() -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let a: Vec<f32> = (0..64 * 256)
        .map(|i| ((i * 3 + i / 256) % 5) as f32 - 2.0)
        .collect();
    let b: Vec<f32> = (0..256 * 64)
        .map(|i| ((i * 7 + i / 64) % 5) as f32 - 2.0)
        .collect();
    let c = (0..64 * 64)
        .map(|i| (0..256).map(|k| a[i / 64 * 256 + k] * b[k * 64 + i % 64]).sum())
        .collect();
    let swizzled = |tile: &dyn Fn(usize, usize) -> f32| {
        let mut out = vec![bf16::ZERO; 64 * 64];
        for r in 0..64 {
            for col in 0..64 {
                out[swizzle_128b(r * 128 + 2 * col) / 2] = bf16::from_f32(tile(r, col));
            }
        }
        out
    };
    let at: Vec<bf16> = (0..4)
        .flat_map(|s| swizzled(&|r, col| a[r * 256 + 64 * s + col]))
        .collect();
    let bt: Vec<bf16> = (0..4)
        .flat_map(|s| swizzled(&|r, col| b[(64 * s + r) * 64 + col]))
        .collect();
    (at, bt, c)
}

/// The multicast ring's operands: `A` (128 x 256), `B` (256 x 64), row-major bf16, and
/// `C = A B`, as `gpukern-device/tests/sim_hopper.rs` gives them.
fn multicast_operands() -> (Vec<bf16>, Vec<bf16>, Vec<f32>) {
    let a = |r: usize, k: usize| (((r * 256 + k) * 3 + r) % 5) as f32 - 2.0;
    let b = |k: usize, n: usize| (((k * 64 + n) * 7 + k) % 5) as f32 - 2.0;
    let c = (0..128 * 64)
        .map(|i| (0..256).map(|k| a(i / 64, k) * b(k, i % 64)).sum())
        .collect();
    let at = (0..128 * 256)
        .map(|i| bf16::from_f32(a(i / 256, i % 256)))
        .collect();
    let bt = (0..256 * 64).map(|i| bf16::from_f32(b(i / 64, i % 64))).collect();
    (at, bt, c)
}

/// Launches `plant` and checks its output.
fn launch(d: &Device, plant: &Plant) -> Result<Outcome, String> {
    let f = d.function(plant.kernel)?;
    let cuda = |e: cudarc::driver::DriverError| Outcome::Cuda(format!("{e}"));
    // Each arm: upload, launch (the kernel's contract: the operands above), download, compare.
    let outcome = match plant.setup {
        Setup::Bulk => {
            let x: Vec<f32> = (1..=128).map(|i| i as f32).collect();
            let (dx, dy) = (d.upload(&x)?, d.upload(&vec![0.0f32; 128])?);
            let shape = (1, mbarrier::THREADS, mbarrier::SHARED_BYTES);
            // SAFETY: the kernel's contract: `x`, `y` of 128 floats.
            match unsafe { d.launch(&f, shape, None, &[d.address(&dx), d.address(&dy)]) } {
                Err(e) => cuda(e),
                Ok(()) => compare(
                    &d.download(&dy).map_err(|e| e.to_string())?,
                    &x.iter().map(|v| 2.0 * v).collect::<Vec<_>>(),
                ),
            }
        }
        Setup::RowSum { rows, cols, swapped } => {
            let x: Vec<f32> = (0..rows * cols)
                .map(|i| (i / cols) as f32 + (i % cols) as f32 / 64.0)
                .collect();
            let (dx, dy) = (d.upload(&x)?, d.upload(&[0.0f32; tma::BOX])?);
            let (map_rows, map_cols) = if swapped { (cols, rows) } else { (rows, cols) };
            let map = Map {
                kind: CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                bytes: 4,
                address: d.address(&dx),
                rows: map_rows as u64,
                cols: map_cols as u64,
                stride: cols as u64,
                box_rows: tma::BOX as u32,
                box_cols: tma::BOX as u32,
            };
            let words = match encode(&map) {
                Ok(words) => words,
                Err(e) => return Ok(Outcome::Refused(format!("{e}"))),
            };
            let dm = d.upload(&words)?;
            let want: Vec<f32> = (0..tma::BOX)
                .map(|r| match r < rows {
                    true => (0..cols.min(tma::BOX)).map(|c| r as f32 + c as f32 / 64.0).sum(),
                    false => 0.0,
                })
                .collect();
            let params = [
                d.address(&dm),
                d.address(&dx),
                rows as u64,
                cols as u64,
                d.address(&dy),
            ];
            // SAFETY: the kernel's contract: the map of `x` as it describes it, `y` of 32 floats.
            match unsafe { d.launch(&f, (1, tma::THREADS, tma::SHARED_BYTES), None, &params) } {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dy).map_err(|e| e.to_string())?, &want),
            }
        }
        Setup::Store { rows, cols } => {
            let dy = d.upload(&vec![-1.0f32; rows * cols])?;
            let map = Map {
                kind: CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                bytes: 4,
                address: d.address(&dy),
                rows: rows as u64,
                cols: cols as u64,
                stride: cols as u64,
                box_rows: tma::BOX as u32,
                box_cols: tma::BOX as u32,
            };
            let words = match encode(&map) {
                Ok(words) => words,
                Err(e) => return Ok(Outcome::Refused(format!("{e}"))),
            };
            let dm = d.upload(&words)?;
            let want: Vec<f32> = (0..rows * cols)
                .map(|i| (1000 * (i / cols) + i % cols) as f32)
                .collect();
            let params = [d.address(&dm), d.address(&dy), rows as u64, cols as u64];
            // SAFETY: the kernel's contract: the map of `y`, `rows x cols` floats.
            match unsafe { d.launch(&f, (1, tma::THREADS, tma::SHARED_BYTES), None, &params) } {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dy).map_err(|e| e.to_string())?, &want),
            }
        }
        Setup::Product | Setup::Rows { .. } | Setup::TmaProduct => {
            let (a, b, mut want) = operands();
            let (da, db, dc) = (d.upload(&a)?, d.upload(&b)?, d.upload(&vec![0.0f32; 64 * 64])?);
            let mut params = vec![d.address(&da), d.address(&db), d.address(&dc)];
            let mut keep = None;
            match plant.setup {
                Setup::Rows { m } => {
                    params.push(m as u64);
                    want[m * 64..].iter_mut().for_each(|w| *w = 0.0);
                }
                Setup::TmaProduct => {
                    let map = |address| Map {
                        kind: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                        bytes: 2,
                        address,
                        rows: 64,
                        cols: 64,
                        stride: 64,
                        box_rows: 64,
                        box_cols: 64,
                    };
                    let mut words = Vec::new();
                    for address in [d.address(&da), d.address(&db)] {
                        match encode(&map(address)) {
                            Ok(w) => words.extend_from_slice(&w),
                            Err(e) => return Ok(Outcome::Refused(format!("{e}"))),
                        }
                    }
                    let dm = d.upload(&words)?;
                    params.insert(0, d.address(&dm));
                    keep = Some(dm);
                }
                _ => {}
            }
            // SAFETY: the kernel's contract: `a`, `b`, `c` of 64 x 64 (and the maps, or `m`).
            let launched = unsafe { d.launch(&f, (1, wgmma::THREADS, wgmma::SHARED_BYTES), None, &params) };
            drop(keep);
            match launched {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dc).map_err(|e| e.to_string())?, &want),
            }
        }
        Setup::Ring => {
            let (a, b, want) = ring_operands();
            let (da, db, dc) = (d.upload(&a)?, d.upload(&b)?, d.upload(&vec![0.0f32; 64 * 64])?);
            let params = [d.address(&da), d.address(&db), d.address(&dc)];
            // SAFETY: the kernel's contract: the tiles of `A` and `B`, `c` of 64 x 64.
            match unsafe {
                d.launch(
                    &f,
                    (1, wgmma::RING_THREADS, wgmma::RING_SHARED_BYTES),
                    None,
                    &params,
                )
            } {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dc).map_err(|e| e.to_string())?, &want),
            }
        }
        Setup::Indices { threads, shared } => {
            let n = threads as usize;
            let dy = d.upload(&vec![-1.0f32; n])?;
            // SAFETY: the kernel's contract: `y` of one float per thread.
            match unsafe { d.launch(&f, (1, threads, shared), None, &[d.address(&dy)]) } {
                Err(e) => cuda(e),
                Ok(()) => compare(
                    &d.download(&dy).map_err(|e| e.to_string())?,
                    &(0..n).map(|t| t as f32).collect::<Vec<_>>(),
                ),
            }
        }
        Setup::Multicast => {
            let (a, b, want) = multicast_operands();
            let (da, db, dc) = (d.upload(&a)?, d.upload(&b)?, d.upload(&vec![0.0f32; 128 * 64])?);
            let map = |address, rows, cols, box_rows| Map {
                kind: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                bytes: 2,
                address,
                rows,
                cols,
                stride: cols,
                box_rows,
                box_cols: 64,
            };
            let mut words = Vec::new();
            for m in [
                map(d.address(&da), 128, 256, 64),
                map(d.address(&db), 256, 64, 32),
            ] {
                match encode(&m) {
                    Ok(w) => words.extend_from_slice(&w),
                    Err(e) => return Ok(Outcome::Refused(format!("{e}"))),
                }
            }
            let dm = d.upload(&words)?;
            let params = [d.address(&dm), d.address(&da), d.address(&db), d.address(&dc)];
            let shape = (2, multicast::THREADS, multicast::SHARED_BYTES);
            // SAFETY: the kernel's contract: two blocks in one cluster, the maps of `a` and `b`,
            // `c` of 128 x 64.
            match unsafe { d.launch(&f, shape, Some(2), &params) } {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dc).map_err(|e| e.to_string())?, &want),
            }
        }
        Setup::Cluster { expect } => {
            let dy = d.upload(&[0.0f32])?;
            // SAFETY: the kernel's contract: two blocks in one cluster, `y` of one float.
            match unsafe { d.launch(&f, (2, cluster::THREADS, 4), Some(2), &[d.address(&dy)]) } {
                Err(e) => cuda(e),
                Ok(()) => compare(&d.download(&dy).map_err(|e| e.to_string())?, &[expect]),
            }
        }
    };
    Ok(outcome)
}
