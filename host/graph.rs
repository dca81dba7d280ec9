//! CUDA graphs: a sequence of gpukern calls captured once on a [`Gpu`]'s stream and replayed
//! with one launch, which costs the CPU one driver call instead of one per kernel.
//!
//! ```no_run
//! # fn main() -> gpukern::Result<()> {
//! let gpu = gpukern::Gpu::new(0)?;
//! let x = gpu.upload_matrix(&ndarray::Array2::<f32>::ones((64, 64)))?;
//! let y = gpu.zeros_matrix(64, 64)?;
//! let z = gpu.zeros_matrix(64, 64)?;
//! // The graph holds the buffers it uses; `buffers()` reads them between replays.
//! let mut graph = gpu.capture_with((x, y, z), |g, (x, y, z)| {
//!     g.softmax_into(x, y, 1.0)?;
//!     g.matmul_into(y, x, z, gpukern::MatmulAlgorithm::Tiled)
//! })?;
//! graph.launch()?;
//! let z = graph.buffers().2.to_array()?;
//! # Ok(()) }
//! ```
//!
//! # What a capture may do
//! The closure runs once, while the stream records instead of executing: kernel launches (every
//! `*_into` operation, `increment_by_one`, a [`crate::Module`]'s generated launchers) are
//! recorded, and run on every [`Graph::launch`]. What cannot be part of a graph is refused with
//! [`Error::Capture`] before it reaches the driver, and the capture then fails with it:
//! * allocations (`upload`, `zeros`, the operations that return a new buffer such as
//!   [`Gpu::matmul`], and the plans that need a temporary buffer: a [`Gpu::matmul_into`] whose
//!   fast plan splits `k`, a softmax of rows long enough for the split plan): allocate every
//!   buffer before capturing; for a matmul that would split `k` pass a one-slice plan to
//!   [`Gpu::matmul_fast_into`] or use another algorithm;
//! * host copies (`to_vec`, `copy_to_host`) and [`Gpu::synchronize`].
//!
//! A buffer's address is baked into the graph, so the buffers a graph uses must outlive it and
//! stay where they are: [`Gpu::capture`] borrows what its closure uses for as long as the graph
//! lives; [`Gpu::capture_with`] takes the buffers into the graph, lends them out between
//! replays ([`Graph::buffers`], [`Graph::buffers_mut`]: write new inputs in place, read
//! results), and refuses to launch when one was replaced since the capture.
//!
//! Do not queue work on the same `Gpu` (the same stream) from another thread while one thread
//! captures: that work would be recorded into the graph instead of running (or be refused as
//! an allocation or copy inside a capture). On the H200 a test suite sharing one `Gpu` between
//! threads saw exactly that: another thread's softmax was recorded into a graph and never ran
//! (`bench/experiments/h200-logs/6088228-kernels.log`). Capture on a `Gpu` of its own
//! ([`Gpu::new`]) or a handle no other thread uses.
//!
//! # On the simulator
//! A simulator `Gpu` keeps the closure: capturing runs it once with every check (shapes,
//! owners, the refusals above) but without running the kernels, as a CUDA capture records
//! without executing; each [`Graph::launch`] runs it again, kernels included.

use cudarc::driver::{CudaGraph, sys};

use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::capture::Capturing;
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::fault;

/// What a graph's closure is: it queues gpukern calls on the `Gpu` it is given.
type Body<'a, B> = Box<dyn FnMut(&Gpu, &mut B) -> Result<()> + 'a>;

/// A captured sequence of gpukern calls on one [`Gpu`], replayed by [`Graph::launch`]. See the
/// [module documentation](self) for what a capture may do.
///
/// `'a` is the lifetime of what the closure borrows: those buffers stay borrowed while the graph
/// lives. `B` is the buffers the graph holds ([`Gpu::capture_with`]; `()` for [`Gpu::capture`]).
pub struct Graph<'a, B = ()> {
    gpu: Gpu,
    buffers: B,
    /// The closure: rerun on every launch by the simulator; kept by CUDA so that what it
    /// borrows or owns lives as long as the graph that uses it.
    body: Body<'a, B>,
    /// The instantiated CUDA graph (`None` on the simulator, or when nothing was captured).
    exec: Option<CudaGraph>,
    /// Where the held buffers were at capture time, (address, length) each.
    addresses: Vec<(usize, usize)>,
}

/// Buffers a graph holds ([`Gpu::capture_with`]): device vectors and matrices, and tuples,
/// arrays and `Vec`s of them. A graph checks before each launch that they are still where they
/// were when it was captured.
pub trait GraphBuffers {
    /// Appends `(address, length)` of every device buffer in `self`, in a fixed order.
    fn addresses(&self, out: &mut Vec<(usize, usize)>);
}

impl<T: Element> GraphBuffers for DeviceVec<T> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        out.push((self.address(), self.len()));
    }
}

impl<T: Element> GraphBuffers for DeviceMatrix<T> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.as_vec().addresses(out);
    }
}

impl GraphBuffers for () {
    fn addresses(&self, _: &mut Vec<(usize, usize)>) {}
}

impl<X: GraphBuffers, const N: usize> GraphBuffers for [X; N] {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.iter().for_each(|x| x.addresses(out));
    }
}

impl<X: GraphBuffers> GraphBuffers for Vec<X> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.iter().for_each(|x| x.addresses(out));
    }
}

macro_rules! tuple_buffers {
    ($($name:ident),+) => {
        impl<$($name: GraphBuffers),+> GraphBuffers for ($($name,)+) {
            #[allow(non_snake_case)]
            fn addresses(&self, out: &mut Vec<(usize, usize)>) {
                let ($($name,)+) = self;
                $($name.addresses(out);)+
            }
        }
    };
}
tuple_buffers!(A);
tuple_buffers!(A, B);
tuple_buffers!(A, B, C);
tuple_buffers!(A, B, C, D);
tuple_buffers!(A, B, C, D, E);
tuple_buffers!(A, B, C, D, E, F);
tuple_buffers!(A, B, C, D, E, F, G);
tuple_buffers!(A, B, C, D, E, F, G, H);

fn addresses_of<B: GraphBuffers>(buffers: &B) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    buffers.addresses(&mut out);
    out
}

impl Gpu {
    /// Captures the gpukern calls `body` queues on this `Gpu` into a [`Graph`] to replay with
    /// [`Graph::launch`]; nothing runs until then. The buffers `body` borrows stay borrowed while
    /// the graph lives (to read results between replays, let the graph hold them:
    /// [`Gpu::capture_with`]).
    ///
    /// Errors: [`Error::Capture`] when `body` allocates, copies to or from the host, or
    /// synchronises (see the [module documentation](crate::graph)), or when the driver refuses
    /// the capture; any error `body` returns (the capture is then abandoned).
    pub fn capture<'a, F>(&self, mut body: F) -> Result<Graph<'a, ()>>
    where
        F: FnMut(&Gpu) -> Result<()> + 'a,
    {
        self.capture_with((), move |g, ()| body(g))
    }

    /// [`Gpu::capture`] of a closure over `buffers`, which the graph holds: read and write them
    /// in place between replays with [`Graph::buffers`] and [`Graph::buffers_mut`], take them
    /// back with [`Graph::into_buffers`].
    pub fn capture_with<'a, B, F>(&self, mut buffers: B, body: F) -> Result<Graph<'a, B>>
    where
        B: GraphBuffers,
        F: FnMut(&Gpu, &mut B) -> Result<()> + 'a,
    {
        let mut body: Body<'a, B> = Box::new(body);
        let exec = match &self.backend {
            Backend::Simulator => {
                let _capturing = Capturing::simulator(true)?;
                body(self, &mut buffers)?;
                None
            }
            Backend::Cuda(d) => {
                let capturing = Capturing::cuda(&d.stream)?;
                d.stream
                    .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .map_err(|e| capture_error("starting a capture", e))?;
                let ran = body(self, &mut buffers);
                // Always end the capture, so the stream runs work again whatever happened.
                let ended = d.stream.end_capture(sys::CUgraphInstantiate_flags(0));
                drop(capturing);
                ran?;
                ended.map_err(|e| {
                    capture_error(
                        "ending the capture (something in the closure did what a capture cannot: \
                         a synchronisation, a host copy, or work from another thread)",
                        e,
                    )
                })?
            }
        };
        Ok(Graph {
            gpu: self.clone(),
            addresses: addresses_of(&buffers),
            buffers,
            body,
            exec,
        })
    }
}

impl<B: GraphBuffers> Graph<'_, B> {
    /// Queues one replay of the captured calls on the `Gpu`'s stream (on the simulator: runs
    /// the closure again). Like any launch it returns before the work finishes; a download or
    /// [`Gpu::synchronize`] waits for it.
    ///
    /// Errors: [`Error::Capture`] when a buffer the graph holds was replaced since the capture
    /// (its address is in the graph); a driver error; on the simulator, what the calls report.
    pub fn launch(&mut self) -> Result<()> {
        if addresses_of(&self.buffers) != self.addresses {
            return Err(Error::Capture {
                op: "Graph::launch",
                detail: "a buffer the graph holds was replaced since the capture (the graph \
                         would use the old one's address): write new data into the buffers in \
                         place, or capture again"
                    .into(),
            });
        }
        match (&self.gpu.backend, &self.exec) {
            (Backend::Simulator, _) => {
                let _capturing = Capturing::simulator(false)?;
                (self.body)(&self.gpu, &mut self.buffers)
            }
            (Backend::Cuda(d), Some(exec)) => {
                fault::launched(&d.ctx, "(a CUDA graph)");
                exec.launch()
                    .map_err(|e| fault::launch_error(&d.ctx, "(a CUDA graph)", e))
            }
            (Backend::Cuda(_), None) => Ok(()),
        }
    }
}

impl<B> Graph<'_, B> {
    /// The `Gpu` the graph runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The buffers the graph holds, to read between replays (a download waits for the
    /// replays queued before it).
    pub fn buffers(&self) -> &B {
        &self.buffers
    }

    /// The buffers the graph holds, to write in place between replays (uploads into them, or
    /// other gpukern calls, queue in order with the replays). Replacing one makes the next
    /// [`Graph::launch`] an error.
    pub fn buffers_mut(&mut self) -> &mut B {
        &mut self.buffers
    }

    /// Drops the graph and gives back its buffers.
    pub fn into_buffers(self) -> B {
        let Graph {
            buffers, exec, body, ..
        } = self;
        drop(exec);
        drop(body);
        buffers
    }
}

/// Maps a driver error of a capture to [`Error::Capture`].
fn capture_error(during: &'static str, e: cudarc::driver::DriverError) -> Error {
    Error::Capture {
        op: "Gpu::capture",
        detail: format!("the driver failed {during}: {e:?}"),
    }
}
