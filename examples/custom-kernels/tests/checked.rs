//! Checked launches and the example's own struct, in the simulator: `saxpy` (every pointer with
//! `#[len(n)]`, so its launcher is safe) over a grid-stride launch sized from the kernel's
//! occupancy; `advance` on a `DeviceVec<Particle>` with a `Step` passed by value, against
//! `Step::apply` on the CPU. Then the planted bugs: a buffer shorter than the declared length
//! (refused before the launch, naming the parameter), and a kernel that reaches past its declared
//! length (reported by the simulator at the declared length, though the buffer goes on).

use gpukern::{Error, Gpu, Module, PtxSet};
use gpukern_device::sim::{Access, Space, Violation};
use kernels::{Particle, Step};

static KERNELS: PtxSet = gpukern::include_ptx!(kernels);

fn simulator() -> Module {
    Gpu::simulator()
        .load(&KERNELS)
        .expect("a simulator module needs no PTX")
}

#[test]
fn saxpy_is_a_safe_launch_over_a_grid_stride_grid() {
    let module = simulator();
    for n in [1, 1000, 300_001] {
        let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32).collect();
        let y: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
        let dx = module.gpu().upload(&x).unwrap();
        let mut dy = module.gpu().upload(&y).unwrap();
        let config = module.grid_stride(&kernels::saxpy::KERNEL, n, 256, 0).unwrap();
        // No `unsafe`: the launcher checks both buffers hold `n`.
        kernels::saxpy::launch(&module, config, 0.5, &dx, &mut dy, n).unwrap();
        let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| 0.5 * a + b).collect();
        assert_eq!(dy.to_vec().unwrap(), want, "n = {n}");
        // 300001 elements need 1172 blocks of 256; the simulated device holds 8 x 132 = 1056.
        let blocks = config.grid.0 as usize;
        assert_eq!(blocks, n.div_ceil(256).min(1056), "n = {n}");
    }
    assert_eq!(kernels::saxpy::KERNEL.params[1].len, Some("n"));
}

#[test]
fn advance_moves_structs_passed_by_value_and_held_in_a_buffer() {
    let module = simulator();
    let n = 777;
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
    let mut d = module.gpu().upload(&particles).unwrap();
    let config = module.grid_stride(&kernels::advance::KERNEL, n, 128, 0).unwrap();
    for _ in 0..3 {
        kernels::advance::launch(&module, config, &mut d, step, n).unwrap();
    }
    let want: Vec<Particle> = particles
        .iter()
        .map(|&p| step.apply(step.apply(step.apply(p))))
        .collect();
    assert_eq!(d.to_vec().unwrap(), want);
    // A part of the buffer: the last 10 particles, one more step.
    d.slice_mut(n - 10..).unwrap().fill(Particle::default()).unwrap();
    let tail = d.slice(n - 10..).unwrap().to_vec().unwrap();
    assert_eq!(tail, vec![Particle::default(); 10]);
}

#[test]
fn a_buffer_shorter_than_the_declared_length_is_refused_before_the_launch() {
    let module = simulator();
    let x = module.gpu().upload(&[1.0f32; 100]).unwrap();
    let mut y = module.gpu().upload(&[2.0f32; 99]).unwrap();
    let config = module.grid_stride(&kernels::saxpy::KERNEL, 100, 256, 0).unwrap();
    let err = kernels::saxpy::launch(&module, config, 1.0, &x, &mut y, 100).unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(err, Error::InvalidArgument { op: "saxpy", .. }),
        "{message}"
    );
    assert!(
        message.contains("`y` holds 99 elements") && message.contains("#[len(n)] = 100"),
        "{message}"
    );
    // Nothing ran.
    assert_eq!(y.to_vec().unwrap(), vec![2.0; 99]);
    // A view too short is refused the same way.
    let err = kernels::saxpy::launch(&module, config, 1.0, x.slice(..50).unwrap(), &mut y, 60).unwrap_err();
    assert!(err.to_string().contains("`x` holds 50 elements"), "{err}");
}

mod planted {
    use gpukern_device::{kernel, mem, thread};

    /// `increment_by_one` that declares `#[len(n)]` but touches element `n` too (`<=`).
    ///
    /// # Safety
    /// None: it breaks its own declaration.
    #[kernel]
    pub unsafe fn increment_one_too_far(#[len(n)] x: *mut f32, n: usize) {
        let i = thread::index_1d();
        if i <= n {
            unsafe { mem::store(x, i, mem::load(x, i) + 1.0) }
        }
    }
}

#[test]
fn a_kernel_past_its_declared_length_is_reported_there_though_the_buffer_goes_on() {
    let module = Gpu::simulator()
        .load(&PtxSet::simulator_only(env!("CARGO_CRATE_NAME")))
        .unwrap();
    // 120 elements, of which the kernel declares 100: element 100 exists, but is not its to touch.
    let mut x = module.gpu().upload(&[0.0f32; 120]).unwrap();
    let config = gpukern::LaunchConfig {
        grid: (1, 1, 1),
        block: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    match planted::increment_one_too_far::launch(&module, config, &mut x, 100) {
        Err(Error::Simulator(report)) => assert_eq!(
            report.violation,
            Violation::OutOfBounds {
                space: Space::Global,
                buffer: "x".into(),
                access: Access::Read,
                index: 100,
                len: 100,
            },
            "{report}"
        ),
        other => panic!("the simulator should report the access at the declared length, got {other:?}"),
    }
}
