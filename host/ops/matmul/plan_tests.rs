//! The unit tests of the matmul plans, without a `Gpu`: a fixed [`MatmulDevice`] stands for
//! an H200, the simulator or an Ampere GPU.

use super::*;

/// A device with `sms` multiprocessors, `resident` stream-K blocks and `shared` bytes of opt-in
/// shared memory per block, the simulator or a CUDA GPU, with `wgmma` or without.
struct Device {
    sms: usize,
    resident: usize,
    shared: u32,
    simulator: bool,
    wgmma: bool,
}

impl MatmulDevice for Device {
    fn multiprocessors(&self) -> Result<usize> {
        Ok(self.sms)
    }
    fn stream_k_resident(&self) -> Result<usize> {
        Ok(self.resident)
    }
    fn is_simulator(&self) -> bool {
        self.simulator
    }
    fn has_wgmma(&self) -> bool {
        self.wgmma
    }
    fn limits(&self) -> DeviceLimits {
        DeviceLimits {
            max_shared_mem_per_block_optin: self.shared,
            ..DeviceLimits::COMMON
        }
    }
}

/// An H200 as the plan sees it: 132 SMs, two stream-K blocks on each, 227 KiB.
const H200: Device = Device {
    sms: 132,
    resident: 264,
    shared: 227 * 1024,
    simulator: false,
    wgmma: true,
};

fn plan(algorithm: MatmulAlgorithm, mkn: (usize, usize, usize), forced: Option<SgemmSchedule>) -> MatmulPlan {
    MatmulPlan::choose_with(&H200, algorithm, mkn, forced).expect("a plan")
}

/// `Fast`: data-parallel by default, the large tiling from one block per SM (132 blocks of
/// 128 x 128: 1408 x 1536), the small one below; stream-K only when forced.
#[test]
fn fast_is_data_parallel_by_default_on_each_side_of_the_large_tiling() {
    let large = MatmulPlan::Fast(FastPlan {
        tile: FastTile::Large,
        slices: 1,
    });
    assert_eq!(plan(MatmulAlgorithm::Fast, (1408, 4096, 1536), None), large);
    assert!(matches!(
        plan(MatmulAlgorithm::Fast, (1408, 4096, 1408), None),
        MatmulPlan::Fast(FastPlan {
            tile: FastTile::Small,
            ..
        })
    ));
    assert_eq!(plan(MatmulAlgorithm::Fast, (4096, 4096, 4096), None), large);
    assert_eq!(
        plan(
            MatmulAlgorithm::Fast,
            (4096, 4096, 4096),
            Some(SgemmSchedule::DataParallel)
        ),
        large
    );
    // Forced stream-K: where the kernel applies (k and n multiples of 4) only.
    assert!(matches!(
        plan(
            MatmulAlgorithm::Fast,
            (4096, 4096, 4096),
            Some(SgemmSchedule::StreamK)
        ),
        MatmulPlan::StreamK(_)
    ));
    assert_eq!(
        plan(
            MatmulAlgorithm::Fast,
            (4096, 4094, 4096),
            Some(SgemmSchedule::StreamK)
        ),
        large
    );
    // By shape: 4096^3 (3.88 waves) takes it, 2048^3 (one wave 97% full) does not.
    assert!(matches!(
        plan(
            MatmulAlgorithm::Fast,
            (4096, 4096, 4096),
            Some(SgemmSchedule::ByShape)
        ),
        MatmulPlan::StreamK(_)
    ));
    assert_eq!(
        plan(
            MatmulAlgorithm::Fast,
            (2048, 2048, 2048),
            Some(SgemmSchedule::ByShape)
        ),
        MatmulPlan::Fast(FastPlan {
            tile: FastTile::Large,
            slices: 1
        })
    );
}

/// `Tf32`: `wgmma` on a CUDA device that has it for `k` a positive multiple of 4, the
/// `mma.sync` tilings elsewhere (and always in the simulator).
#[test]
fn tf32_takes_wgmma_only_on_a_hopper_gpu_for_k_a_multiple_of_4() {
    let tf32 =
        |device: &Device, k| MatmulPlan::choose_with(device, MatmulAlgorithm::Tf32, (4096, k, 4096), None);
    assert_eq!(
        tf32(&H200, 4096).expect("plan"),
        MatmulPlan::Tf32(Tf32Tile::Wgmma)
    );
    assert_eq!(tf32(&H200, 4094).expect("plan"), MatmulPlan::Tf32(Tf32Tile::Wide));
    assert_eq!(tf32(&H200, 0).expect("plan"), MatmulPlan::Tf32(Tf32Tile::Wide));
    let sim = Device {
        simulator: true,
        ..H200
    };
    assert_eq!(tf32(&sim, 4096).expect("plan"), MatmulPlan::Tf32(Tf32Tile::Wide));
    let ampere = Device { wgmma: false, ..H200 };
    assert_eq!(
        tf32(&ampere, 4096).expect("plan"),
        MatmulPlan::Tf32(Tf32Tile::Wide)
    );
    // Too few 128 x 256 tiles for the SMs: the square tiling.
    assert_eq!(
        MatmulPlan::choose_with(&ampere, MatmulAlgorithm::Tf32, (1024, 64, 1024), None).expect("plan"),
        MatmulPlan::Tf32(Tf32Tile::Square)
    );
}

/// The one `mma.sync` tiling struct gives each kernel the shared memory its two structs
/// gave before (the TF32 tiles stage f32 with 4 and 8 floats of padding, the half-precision
/// tile 16-bit elements with 8).
#[test]
fn mma_tilings_keep_their_shared_memory() {
    assert_eq!(TF32_128X128.shared_bytes(), 107_520);
    assert_eq!(TF32_128X256.shared_bytes(), 208_896);
    assert_eq!(TF32_128X128_K16.shared_bytes(), 75_776);
    assert_eq!(HALF_128X128.shared_bytes(), 75_776);
    assert_eq!(TF32_128X256.threads(), 256);
    assert_eq!(HALF_128X128.threads(), 128);
}

/// The plans as they were written before their rules became [`MATMUL_RULES`], [`FAST_RULES`],
/// [`TF32_RULES`] and [`WS_RULES`] (code with prose), kept to pin the refactor.
mod before_rules {
    use super::*;

    pub(super) fn matmul(
        device: &impl MatmulDevice,
        algorithm: MatmulAlgorithm,
        (m, k, n): (usize, usize, usize),
        forced: Option<SgemmSchedule>,
    ) -> Result<MatmulPlan> {
        Ok(match algorithm {
            MatmulAlgorithm::Naive => MatmulPlan::Naive,
            MatmulAlgorithm::Tiled => MatmulPlan::Tiled,
            MatmulAlgorithm::Fast => {
                let plan = fast(m, n, k, device.multiprocessors()?);
                let large = plan
                    == FastPlan {
                        tile: FastTile::Large,
                        slices: 1,
                    };
                #[allow(clippy::manual_is_multiple_of)]
                let vec4_shape = k % 4 == 0 && n % 4 == 0;
                let stream_k = match forced {
                    Some(SgemmSchedule::DataParallel) => None,
                    _ if !vec4_shape || k == 0 => None,
                    Some(SgemmSchedule::StreamK) => {
                        Some(StreamKPlan::with_ctas(m, n, device.stream_k_resident()?))
                    }
                    Some(SgemmSchedule::ByShape) if large => {
                        StreamKPlan::choose(m, n, k, device.stream_k_resident()?)
                    }
                    Some(SgemmSchedule::ByShape) | None => None,
                };
                stream_k.map_or(MatmulPlan::Fast(plan), MatmulPlan::StreamK)
            }
            MatmulAlgorithm::Tf32
                if !device.is_simulator() && Tf32Tile::wgmma_applies(k, true, device.has_wgmma()) =>
            {
                MatmulPlan::Tf32(Tf32Tile::Wgmma)
            }
            MatmulAlgorithm::Tf32 => {
                MatmulPlan::Tf32(tf32(m, n, device.multiprocessors()?, &device.limits()))
            }
        })
    }

    pub(super) fn tf32(m: usize, n: usize, multiprocessors: usize, limits: &DeviceLimits) -> Tf32Tile {
        let fits = |t: Tf32Tiling| t.shared_bytes() <= limits.max_shared_mem_per_block_optin;
        let wide = TF32_128X256;
        let blocks = m.div_ceil(wide.block_rows) * n.div_ceil(wide.block_cols);
        if blocks >= multiprocessors.max(1) && fits(wide) {
            Tf32Tile::Wide
        } else if fits(TF32_128X128) {
            Tf32Tile::Square
        } else {
            Tf32Tile::SquareK16
        }
    }

    pub(super) fn fast(m: usize, n: usize, k: usize, multiprocessors: usize) -> FastPlan {
        let blocks = |t: FastTiling| m.div_ceil(t.block_rows) * n.div_ceil(t.block_cols);
        let sms = multiprocessors.max(1);
        if blocks(FAST_128) >= sms {
            return FastPlan {
                tile: FastTile::Large,
                slices: 1,
            };
        }
        let tiles = blocks(FAST_64).max(1);
        let slices = if tiles >= sms {
            1
        } else {
            (SPLIT_BLOCKS_PER_MULTIPROCESSOR * sms)
                .div_ceil(tiles)
                .min(k / MIN_SPLIT_K)
                .clamp(1, MAX_SLICES)
        };
        FastPlan {
            tile: FastTile::Small,
            slices,
        }
    }

    pub(super) fn ws(m: usize, n: usize, multiprocessors: usize) -> WsTile {
        let wave = multiprocessors.max(1) * WS_WAVE_PERCENT;
        WsTile::ALL
            .into_iter()
            .find(|t| t.tiling().tiles(m, n) * 100 >= wave)
            .unwrap_or(WsTile::Narrow)
    }
}

/// The rule lists choose what the code they replaced chose, on every algorithm and forced
/// schedule, for sizes 1 to 130 and on each side of every multiple of 64 up to 9000 (`m` all of
/// them, `n` a spread for each), `k` of 0 to 8192 (some not multiples of 4), on six devices: an
/// H200, the simulator, an Ampere GPU of 99 KiB and an A100 (163 KiB) without `wgmma`, and Hopper
/// GPUs of 7 SMs with 64 KiB and of one SM.
#[test]
fn the_rules_choose_what_the_code_before_them_chose() {
    let mut sizes: Vec<usize> = (1..=130).collect();
    for t in (192..=9000).step_by(64) {
        sizes.extend([t - 1, t, t + 1]);
    }
    let ks = [
        0, 1, 3, 4, 63, 64, 255, 256, 257, 511, 512, 1024, 4093, 4096, 8192,
    ];
    let schedules = [
        None,
        Some(SgemmSchedule::StreamK),
        Some(SgemmSchedule::DataParallel),
        Some(SgemmSchedule::ByShape),
    ];
    let devices = [
        (132, 227, false, true),
        (132, 227, true, true),
        (132, 99, false, false),
        (108, 163, false, false),
        (7, 64, false, true),
        (1, 227, false, true),
    ];
    let mut checked = 0usize;
    for (sms, kib, simulator, wgmma) in devices {
        let device = Device {
            sms,
            resident: 2 * sms,
            shared: kib * 1024,
            simulator,
            wgmma,
        };
        for (i, &m) in sizes.iter().enumerate() {
            for &n in sizes.iter().skip(i % 13).step_by(13) {
                assert_eq!(
                    Tf32Tile::choose(m, n, sms, &device.limits()),
                    before_rules::tf32(m, n, sms, &device.limits())
                );
                assert_eq!(WsTile::choose(m, n, sms), before_rules::ws(m, n, sms));
                for k in ks {
                    assert_eq!(FastPlan::choose(m, n, k, sms), before_rules::fast(m, n, k, sms));
                    for algorithm in MatmulAlgorithm::ALL {
                        for forced in schedules {
                            let new = MatmulPlan::choose_with(&device, algorithm, (m, k, n), forced);
                            let old = before_rules::matmul(&device, algorithm, (m, k, n), forced);
                            assert_eq!(
                                new.ok(),
                                old.ok(),
                                "{algorithm:?} {m}x{k}x{n} {forced:?} sms {sms}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1_000_000, "{checked}");
}

/// Each rule on both sides of its boundary (an H200: 132 SMs, 227 KiB).
#[test]
fn each_rule_on_each_side_of_its_boundary() {
    let sms = 132;
    let small = |slices| FastPlan {
        tile: FastTile::Small,
        slices,
    };
    // FAST_RULES: 132 blocks of 128 x 128 (11 x 12) fill the SMs, 131 do not.
    assert_eq!(
        FastPlan::choose(128 * 11, 128 * 12, 4096, sms),
        FastPlan::LARGE_WHOLE
    );
    assert_eq!(FastPlan::choose(128 * 11, 128 * 12 - 128, 4096, sms), small(1));
    // 132 blocks of 64 x 64 fill them with `k` whole; 131 split `k` for about 264 blocks
    // (3 slices), bounded by `k / 256` and 16.
    assert_eq!(FastPlan::choose(64 * 11, 64 * 12, 4096, sms), small(1));
    assert_eq!(FastPlan::choose(64 * 131, 64, 4096, sms), small(3));
    assert_eq!(FastPlan::choose(64 * 131, 64, 511, sms), small(1));
    assert_eq!(FastPlan::choose(64 * 131, 64, 512, sms), small(2));
    assert_eq!(FastPlan::choose(1, 64, 1 << 20, sms), small(MAX_SLICES));
    // TF32_RULES: 132 blocks of 128 x 256 and 204 KiB fit: wide; 131, or 163 KiB: square;
    // 99 KiB: the `BK = 16` square.
    let limits = |kib: u32| DeviceLimits {
        max_shared_mem_per_block_optin: kib * 1024,
        ..DeviceLimits::COMMON
    };
    assert_eq!(
        Tf32Tile::choose(128 * 11, 256 * 12, sms, &limits(227)),
        Tf32Tile::Wide
    );
    assert_eq!(
        Tf32Tile::choose(128 * 11, 256 * 11, sms, &limits(227)),
        Tf32Tile::Square
    );
    assert_eq!(Tf32Tile::choose(4096, 4096, sms, &limits(163)), Tf32Tile::Square);
    assert_eq!(Tf32Tile::choose(4096, 4096, sms, &limits(105)), Tf32Tile::Square);
    assert_eq!(
        Tf32Tile::choose(4096, 4096, sms, &limits(104)),
        Tf32Tile::SquareK16
    );
    // WS_RULES: at least 90% of 132 SMs (119 tiles) take the larger tile.
    assert_eq!(WsTile::choose(128 * 119, 256, sms), WsTile::Wide);
    assert_eq!(WsTile::choose(128 * 118, 256, sms), WsTile::Square);
    // 384 columns: 2 tiles of 128 x 256 per 128 rows, 3 of 128 x 128.
    assert_eq!(WsTile::choose(128 * 40, 384, sms), WsTile::Square);
    assert_eq!(WsTile::choose(128 * 39, 384, sms), WsTile::Narrow);
    assert_eq!(WsTile::choose(1, 1, sms), WsTile::Narrow);
    // MATMUL_RULES: forced stream-K needs k > 0 and k, n multiples of 4; by shape, the large
    // whole-k plan too; TF32's wgmma k a positive multiple of 4 on a CUDA device with sm_90a.
    let fast = |mkn, forced| plan(MatmulAlgorithm::Fast, mkn, forced);
    let stream_k = Some(SgemmSchedule::StreamK);
    assert!(matches!(fast((64, 4, 64), stream_k), MatmulPlan::StreamK(_)));
    assert!(matches!(fast((64, 0, 64), stream_k), MatmulPlan::Fast(_)));
    assert!(matches!(fast((64, 4, 66), stream_k), MatmulPlan::Fast(_)));
    assert!(matches!(fast((64, 6, 64), stream_k), MatmulPlan::Fast(_)));
    let by_shape = Some(SgemmSchedule::ByShape);
    assert!(matches!(
        fast((4096, 4096, 4096), by_shape),
        MatmulPlan::StreamK(_)
    ));
    assert!(matches!(fast((4096, 255, 4096), by_shape), MatmulPlan::Fast(_)));
    assert!(matches!(fast((1024, 4096, 1024), by_shape), MatmulPlan::Fast(_)));
    let tf32 = |k| plan(MatmulAlgorithm::Tf32, (4096, k, 4096), None);
    assert_eq!(tf32(4), MatmulPlan::Tf32(Tf32Tile::Wgmma));
    assert_eq!(tf32(2), MatmulPlan::Tf32(Tf32Tile::Wide));
    assert_eq!(
        plan(MatmulAlgorithm::Naive, (1, 1, 1), by_shape),
        MatmulPlan::Naive
    );
    assert_eq!(
        plan(MatmulAlgorithm::Tiled, (1, 1, 1), stream_k),
        MatmulPlan::Tiled
    );
}

/// Every record a rule cites is a committed file; each algorithm's last rule always applies
/// (so [`MatmulPlan::choose`]'s fallback is never reached), as do the last rules of the tile
/// lists.
#[test]
fn the_rules_cite_committed_records_and_end_with_one_that_always_applies() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let records = MATMUL_RULES
        .iter()
        .flat_map(|r| r.records)
        .chain(FAST_RULES.iter().flat_map(|r| r.records))
        .chain(TF32_RULES.iter().flat_map(|r| r.records))
        .chain(WS_RULES.iter().flat_map(|r| r.records));
    for record in records {
        assert!(root.join(record).is_file(), "{record}");
    }
    let tiny = Device {
        sms: 1,
        resident: 1,
        shared: 0,
        simulator: true,
        wgmma: false,
    };
    for (algorithm, last) in [
        (MatmulAlgorithm::Naive, MatmulRule::Naive),
        (MatmulAlgorithm::Tiled, MatmulRule::Tiled),
        (MatmulAlgorithm::Fast, MatmulRule::DataParallel),
        (MatmulAlgorithm::Tf32, MatmulRule::Tf32Mma),
    ] {
        for (m, k, n) in [(1, 0, 1), (1, 3, 1), (9000, 9000, 9000)] {
            let applied = last
                .apply(&tiny, algorithm, (m, k, n), None)
                .expect("infallible device");
            assert!(applied.is_some(), "{last:?}");
        }
    }
    let zero = DeviceLimits {
        max_shared_mem_per_block_optin: 0,
        ..DeviceLimits::COMMON
    };
    assert_eq!(
        Tf32Rule::SquareK16.apply(1, 1, 1, &zero),
        Some(Tf32Tile::SquareK16)
    );
    assert!(FastRule::SmallSplit.apply(1, 1, 0, 1).is_some());
    assert_eq!(WS_RULES.last().map(|r| r.rule), Some(WsTile::Narrow));
}
