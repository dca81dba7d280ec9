//! Where the processes of a job meet: each one's rank, the world's size, rank 0's address and how
//! long to wait for the others, from the environment torchrun sets or given by hand.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, Result};

/// The default of [`Rendezvous::timeout`]: how long a rank waits for the others to arrive (a
/// rank other than 0, once it reached rank 0, waits 2 s more for rank 0 to say why not), and for
/// a collective to finish in [`crate::dist::Communicator::synchronize`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The variable that sets [`Rendezvous::timeout`] in seconds for [`Rendezvous::from_env`].
pub const TIMEOUT_ENV: &str = "GPUKERN_DIST_TIMEOUT_S";

/// One process's place in a job of `world` processes, and where they meet: rank 0 listens on
/// `address`, the others connect to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendezvous {
    /// This process's rank, `0..world`.
    pub rank: usize,
    /// How many processes the job has.
    pub world: usize,
    /// Rank 0's address (`MASTER_ADDR:MASTER_PORT`).
    pub address: SocketAddr,
    /// The GPU of this machine the process uses (`LOCAL_RANK`; `rank` when not given).
    pub local_rank: usize,
    /// How long to wait for every rank to arrive (and, once connected, for a collective to end).
    pub timeout: Duration,
}

impl Rendezvous {
    /// A rendezvous given by hand; `address` is resolved here.
    ///
    /// Errors: [`Error::InvalidArgument`] for a world of 0, a rank outside it, or an address that
    /// does not resolve.
    pub fn new(
        rank: usize,
        world: usize,
        address: impl ToSocketAddrs + std::fmt::Debug,
    ) -> Result<Rendezvous> {
        let resolved = address
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| Error::InvalidArgument {
                op: "dist::Rendezvous",
                detail: format!("the address {address:?} does not resolve to a socket address"),
            })?;
        let r = Rendezvous {
            rank,
            world,
            address: resolved,
            local_rank: rank,
            timeout: DEFAULT_TIMEOUT,
        };
        r.check()?;
        Ok(r)
    }

    /// This one with another timeout.
    pub fn with_timeout(self, timeout: Duration) -> Rendezvous {
        Rendezvous { timeout, ..self }
    }

    /// This one with another local rank (the GPU ordinal).
    pub fn with_local_rank(self, local_rank: usize) -> Rendezvous {
        Rendezvous { local_rank, ..self }
    }

    /// The rendezvous torchrun's environment describes: `RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
    /// `MASTER_PORT`, and `LOCAL_RANK` if set (else the rank); the timeout from
    /// `GPUKERN_DIST_TIMEOUT_S` if set (else [`DEFAULT_TIMEOUT`]).
    ///
    /// Errors: [`Error::InvalidArgument`] naming the variable that is missing or not a number, or
    /// as [`Rendezvous::new`].
    pub fn from_env() -> Result<Rendezvous> {
        Rendezvous::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Rendezvous::from_env`] over any source of variables (for tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Rendezvous> {
        let missing = |name: &str| Error::InvalidArgument {
            op: "dist::Rendezvous::from_env",
            detail: format!(
                "{name} is not set: a launcher such as torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, \
                 MASTER_PORT (and LOCAL_RANK) for each process; set them, or use Rendezvous::new"
            ),
        };
        let number = |name: &str| -> Result<usize> {
            let text = var(name).ok_or_else(|| missing(name))?;
            text.trim().parse().map_err(|_| Error::InvalidArgument {
                op: "dist::Rendezvous::from_env",
                detail: format!("{name}={text:?} is not a non-negative integer"),
            })
        };
        let rank = number("RANK")?;
        let world = number("WORLD_SIZE")?;
        let host = var("MASTER_ADDR").ok_or_else(|| missing("MASTER_ADDR"))?;
        let port = number("MASTER_PORT")?;
        let port = u16::try_from(port).map_err(|_| Error::InvalidArgument {
            op: "dist::Rendezvous::from_env",
            detail: format!("MASTER_PORT={port} is not a port (at most 65535)"),
        })?;
        let local_rank = if var("LOCAL_RANK").is_some() {
            number("LOCAL_RANK")?
        } else {
            rank
        };
        let timeout = match var(TIMEOUT_ENV) {
            Some(text) => {
                let secs: f64 = text
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| Error::InvalidArgument {
                        op: "dist::Rendezvous::from_env",
                        detail: format!("{TIMEOUT_ENV}={text:?} is not a positive number of seconds"),
                    })?;
                Duration::from_secs_f64(secs)
            }
            None => DEFAULT_TIMEOUT,
        };
        Ok(Rendezvous::new(rank, world, (host.as_str(), port))?
            .with_local_rank(local_rank)
            .with_timeout(timeout))
    }

    /// Errors unless the world has at least one rank and this rank is in it.
    fn check(&self) -> Result<()> {
        if self.world == 0 || self.rank >= self.world {
            return Err(Error::InvalidArgument {
                op: "dist::Rendezvous",
                detail: format!(
                    "rank {} of a world of {}: a rank must be below the world's size, which must be at least 1",
                    self.rank, self.world
                ),
            });
        }
        Ok(())
    }
}
