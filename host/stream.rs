//! Streams and events: several queues of work on one device, and the ordering between them.
//!
//! [`Gpu::stream`] gives a second handle on the same device: same context, same loaded kernels,
//! its own CUDA stream. Every operation of a `Gpu` (uploads, [`Gpu::matmul_into`],
//! [`Gpu::softmax_into`], launches through [`Gpu::library`] or a loaded [`crate::Module`], ...)
//! queues on that handle's stream, so the work of two handles may run at the same time: a copy
//! on one beside a kernel on the other.
//!
//! # The contract: no race in safe code
//! A buffer belongs to the stream of the handle that made it (its *home* stream):
//! * copies of a buffer ([`crate::DeviceVec::to_vec`], [`crate::DeviceVec::copy_to_pinned`],
//!   [`crate::DeviceVec::copy_from_pinned`], ...) and its free run on its home stream;
//! * a kernel launched on another stream of the same device that reads or writes it waits for
//!   everything queued on the home stream before the launch, and the home stream waits for that
//!   kernel before anything queued on it afterwards (its free included). Every use of a buffer
//!   is thus ordered after the uses queued before it, whichever streams they ran on: a kernel
//!   writing on stream A and a read on stream B never overlap.
//!
//! The ordering costs two event records and two waits per foreign buffer of a launch, and
//! nothing (one pointer comparison) when every buffer of a launch is on the launching stream:
//! the path of a program that never calls [`Gpu::stream`]. Kernels touching a shared buffer from
//! several streams run one after the other; for overlap, give each stream its own buffers (what
//! [`Gpu::pipelined`](crate::pinned) does) and share only what is read.
//!
//! [`Event`]s order streams explicitly (record on one, wait on another) and time them.
//! In the simulator a stream handle is the simulator again and everything runs in call order.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result, sys};

use crate::cache::Caches;
use crate::device::{Backend, CudaDevice, Gpu};
use crate::error::{DriverContext, Error, Result};
use crate::fault;

impl Gpu {
    /// A new handle on this device with its own stream: work queued on it may overlap with work
    /// queued on `self` (see [the contract](crate::stream)). Buffers of either handle may be
    /// used by the kernels of the other; copies of a buffer run on the stream of the handle that
    /// made it.
    ///
    /// In the simulator, another simulator handle (work runs in call order).
    ///
    /// Errors: [`Error::Driver`] if the driver cannot create a stream.
    pub fn stream(&self) -> Result<Gpu> {
        match &self.backend {
            Backend::Cuda(d) => {
                let stream = d.ctx.new_stream().during("creating a stream")?;
                Ok(Gpu {
                    backend: Backend::Cuda(Arc::new(d.on_stream(stream))),
                })
            }
            Backend::Simulator => Ok(Gpu::simulator()),
        }
    }

    /// Whether `other` is a handle on the same device and context as `self` (made from it with
    /// [`Gpu::stream`], or a clone): then each can use the other's buffers. Two simulators are.
    pub fn same_device(&self, other: &Gpu) -> bool {
        match (&self.backend, &other.backend) {
            (Backend::Cuda(a), Backend::Cuda(b)) => Arc::ptr_eq(&a.ctx, &b.ctx),
            (Backend::Simulator, Backend::Simulator) => true,
            _ => false,
        }
    }

    /// Records the work queued on this handle's stream so far: wait for it with
    /// [`Gpu::wait`] on another stream, [`Event::synchronize`] on the host, or time it with
    /// [`Event::elapsed_ms`].
    pub fn record(&self) -> Result<Event> {
        match &self.backend {
            Backend::Cuda(d) => {
                let event = d
                    .ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .during("creating an event")?;
                event.record(&d.stream).during("recording an event")?;
                Ok(Event {
                    inner: EventInner::Cuda(event),
                })
            }
            Backend::Simulator => Ok(Event {
                inner: EventInner::Simulator(std::time::Instant::now()),
            }),
        }
    }

    /// Makes everything queued on this handle's stream from now on wait until the work `event`
    /// recorded has finished (the host does not wait).
    ///
    /// Errors: [`Error::WrongDevice`] if the event was recorded on another device (or the
    /// simulator).
    pub fn wait(&self, event: &Event) -> Result<()> {
        match (&self.backend, &event.inner) {
            (Backend::Cuda(d), EventInner::Cuda(e)) if Arc::ptr_eq(&d.ctx, e.context()) => {
                d.stream.wait(e).during("making a stream wait for an event")
            }
            (Backend::Simulator, EventInner::Simulator(_)) => Ok(()),
            _ => Err(Error::WrongDevice { op: "Gpu::wait" }),
        }
    }
}

impl CudaDevice {
    /// This device's context and kernels, with `stream` as its queue and caches of its own.
    fn on_stream(&self, stream: Arc<CudaStream>) -> CudaDevice {
        CudaDevice {
            ctx: self.ctx.clone(),
            stream,
            library: self.library.clone(),
            limits: self.limits,
            name: self.name.clone(),
            compute_capability: self.compute_capability,
            arch: self.arch,
            multiprocessors: self.multiprocessors,
            residency: self.residency.clone(),
            modules: self.modules.clone(),
            caches: Caches::default(),
        }
    }
}

/// A point in a stream's work, recorded by [`Gpu::record`].
pub struct Event {
    inner: EventInner,
}

enum EventInner {
    Cuda(CudaEvent),
    /// The simulator runs each call to its end: an event is the moment it was recorded.
    Simulator(std::time::Instant),
}

impl Event {
    /// Waits on the host until the recorded work has finished; reports a kernel's fault.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            EventInner::Cuda(e) => fault::synced(e.context(), "waiting for an event", e.synchronize()),
            EventInner::Simulator(_) => Ok(()),
        }
    }

    /// Milliseconds from `self` to `end` (both recorded; waits for `end`). In the simulator,
    /// host time between the two records.
    ///
    /// Errors: [`Error::WrongDevice`] if the events are of different devices.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        match (&self.inner, &end.inner) {
            (EventInner::Cuda(a), EventInner::Cuda(b)) if Arc::ptr_eq(a.context(), b.context()) => {
                let ms = fault::synced(a.context(), "timing two events", a.elapsed_ms(b))?;
                Ok(f64::from(ms))
            }
            (EventInner::Simulator(a), EventInner::Simulator(b)) => {
                Ok(b.saturating_duration_since(*a).as_secs_f64() * 1e3)
            }
            _ => Err(Error::WrongDevice {
                op: "Event::elapsed_ms",
            }),
        }
    }
}

/// Most distinct foreign streams one launch orders itself against (one per buffer parameter
/// at most; a launch with more buffers on more streams than this is refused).
pub(crate) const MAX_FOREIGN: usize = 8;

/// The streams other than the launching one that a launch's buffers live on, collected while
/// its arguments are pushed; empty (and free) when every buffer is on the launching stream.
#[derive(Default)]
pub(crate) struct CrossStream {
    streams: [Option<sys::CUstream>; MAX_FOREIGN],
    count: usize,
}

impl CrossStream {
    /// Notes that a buffer of the launch lives on `home`, which is not the launching stream.
    /// `false` if there is no room left.
    pub(crate) fn note(&mut self, home: &CudaStream) -> bool {
        let home = home.cu_stream();
        if self.streams[..self.count].contains(&Some(home)) {
            return true;
        }
        match self.streams.get_mut(self.count) {
            Some(slot) => {
                *slot = Some(home);
                self.count += 1;
                true
            }
            None => false,
        }
    }

    /// Whether every buffer is on the launching stream.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Before the launch: `launch` waits for everything queued so far on each home stream.
    /// Returns the event to hand to [`CrossStream::after`].
    pub(crate) fn before(&self, ctx: &Arc<CudaContext>, launch: &CudaStream) -> Result<JoinEvent> {
        let event = JoinEvent::new(ctx)?;
        for home in self.streams[..self.count].iter().flatten() {
            event.join(launch.cu_stream(), *home)?;
        }
        Ok(event)
    }

    /// After the launch: each home stream waits for the launch before its later work (a copy,
    /// another kernel, the buffer's free).
    pub(crate) fn after(&self, event: JoinEvent, launch: &CudaStream) -> Result<()> {
        for home in self.streams[..self.count].iter().flatten() {
            event.join(*home, launch.cu_stream())?;
        }
        Ok(())
    }
}

/// One event reused for every join of a launch: `cuStreamWaitEvent` takes the event's state
/// when it is called, so recording it again afterwards does not change an earlier wait.
pub(crate) struct JoinEvent(sys::CUevent);

impl JoinEvent {
    fn new(ctx: &Arc<CudaContext>) -> Result<JoinEvent> {
        ctx.bind_to_thread().during("ordering streams")?;
        result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map(JoinEvent)
            .during("creating an event to order streams")
    }

    /// `waiter` waits for the work queued on `on` so far.
    fn join(&self, waiter: sys::CUstream, on: sys::CUstream) -> Result<()> {
        // SAFETY: both streams are alive (each is the stream of a handle or buffer borrowed by
        // the launch), and the event was created in their context.
        unsafe {
            result::event::record(self.0, on).during("ordering streams")?;
            result::stream::wait_event(waiter, self.0, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .during("ordering streams")
        }
    }
}

impl Drop for JoinEvent {
    fn drop(&mut self) {
        // SAFETY: created by `JoinEvent::new`, destroyed once; the driver releases an event
        // with pending work once that work completes.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}
