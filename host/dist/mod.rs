//! Several processes, one GPU each, working together: NCCL communicators across processes and
//! hosts, set up the way torchrun sets up PyTorch's (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
//! `MASTER_PORT`, `LOCAL_RANK`), with timeouts instead of hangs.
//!
//! ```no_run
//! # fn main() -> gpukern::Result<()> {
//! use gpukern::dist::{Communicator, ReduceOp};
//! let comm = Communicator::from_env()?;            // every process of the job calls it
//! let mut grad = comm.gpu().upload(&[1.0f32; 1024])?;
//! comm.all_reduce(&mut grad, ReduceOp::Sum)?;      // queued on the GPU's stream
//! comm.synchronize()?;                             // an error, not a hang, if a rank died
//! assert_eq!(grad.to_vec()?[0], comm.world() as f32);
//! # Ok(()) }
//! ```
//!
//! How the processes meet ([`Rendezvous`], `store`): rank 0 listens on `MASTER_ADDR:MASTER_PORT`,
//! makes NCCL's unique id and hands it to every other rank over TCP once all have arrived; a rank
//! that never arrives is an [`crate::Error::Dist`] on every rank within the rendezvous's timeout
//! (the ones that came hear why from rank 0). Then each rank makes its NCCL communicator on its
//! own GPU (within the same timeout) and the collectives run on that GPU's stream:
//! [`Communicator::all_reduce`] (sum, max, min, mean), [`Communicator::reduce_scatter`],
//! [`Communicator::all_gather`], [`Communicator::broadcast`], [`Communicator::send`] /
//! [`Communicator::recv`], several at once in a [`Communicator::group`], and
//! [`Communicator::split`] into tensor- and data-parallel groups.
//!
//! NCCL is loaded at run time (see [`crate::multi`] for where cudarc looks for it). The
//! simulator runs a world of one.

mod comm;
mod rendezvous;
mod store;

pub use comm::{Communicator, DistElement, ReduceOp};
pub use rendezvous::{DEFAULT_TIMEOUT, Rendezvous, TIMEOUT_ENV};
#[doc(hidden)]
pub use store::{PAYLOAD, share};
