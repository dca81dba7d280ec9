//! The unit tests of the matmul plans, without a `Gpu`: a fixed [`MatmulDevice`] stands for
//! an H200, the simulator or an Ampere GPU.

use super::*;

/// An H200 as the plan sees it, or the simulator.
struct Device {
    simulator: bool,
    wgmma: bool,
}

impl MatmulDevice for Device {
    fn multiprocessors(&self) -> Result<usize> {
        Ok(132)
    }
    fn stream_k_resident(&self) -> Result<usize> {
        Ok(264)
    }
    fn is_simulator(&self) -> bool {
        self.simulator
    }
    fn has_wgmma(&self) -> bool {
        self.wgmma
    }
    fn limits(&self) -> DeviceLimits {
        DeviceLimits {
            max_shared_mem_per_block_optin: 227 * 1024,
            ..DeviceLimits::COMMON
        }
    }
}

const H200: Device = Device {
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
        wgmma: true,
    };
    assert_eq!(tf32(&sim, 4096).expect("plan"), MatmulPlan::Tf32(Tf32Tile::Wide));
    let ampere = Device {
        simulator: false,
        wgmma: false,
    };
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
