//! The rendezvous itself: rank 0 listens on the job's address, every other rank connects and
//! says who it is, and once all have arrived rank 0 hands each the 128 bytes of NCCL's unique id
//! (or tells them why not). A small TCP exchange of our own (no store crate: it is four messages),
//! bounded everywhere by the rendezvous's timeout, so that a rank that never arrives, or arrives
//! for another job, is an error on every rank instead of a hang.
//!
//! Messages (integers little-endian):
//! * hello, rank r to rank 0: `GPUKERN1`, r (u32), world (u32);
//! * answer, rank 0 to each: 0 then the 128 bytes; or 1, a length (u32) and a UTF-8 reason.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::rendezvous::Rendezvous;
use crate::error::{Error, Result};

/// What a hello starts with.
const MAGIC: &[u8; 8] = b"GPUKERN1";

/// The bytes rank 0 hands out (NCCL's `ncclUniqueId`).
pub const PAYLOAD: usize = 128;

/// How long a client waits between tries while rank 0 is not listening yet.
const RETRY: Duration = Duration::from_millis(50);

/// How long past its own deadline a rank that reached rank 0 still waits for the answer: rank 0
/// gives its verdict (a missing rank named) at its own deadline, which is later when it started
/// later, so without this margin a rank would time out just before hearing why.
const GRACE: Duration = Duration::from_secs(2);

/// A rendezvous failure, as an [`Error`].
fn fail(r: &Rendezvous, detail: String) -> Error {
    Error::Dist {
        during: "the rendezvous",
        detail: format!("rank {} of {} ({}): {detail}", r.rank, r.world, r.address),
    }
}

/// Meets the other ranks of `r` and returns rank 0's `payload` on every rank: rank 0 passes
/// `Some(payload)`, the others `None`. A world of one returns at once.
///
/// Errors: [`Error::Dist`] when a rank does not arrive within the timeout (on every rank that
/// did, naming the missing ones on rank 0), when rank 0 cannot be reached or listened for, or
/// when a hello does not fit the job (another world size, a rank out of range or twice).
pub fn share(r: &Rendezvous, payload: Option<[u8; PAYLOAD]>) -> Result<[u8; PAYLOAD]> {
    let deadline = Instant::now() + r.timeout;
    match (r.rank, payload) {
        (0, Some(p)) if r.world == 1 => Ok(p),
        (0, Some(p)) => serve(r, p, deadline),
        (0, None) => Err(fail(r, "rank 0 must bring the payload".into())),
        (_, _) => join(r, deadline),
    }
}

/// Rank 0: accept every other rank's hello, then answer them all.
fn serve(r: &Rendezvous, payload: [u8; PAYLOAD], deadline: Instant) -> Result<[u8; PAYLOAD]> {
    let listener =
        TcpListener::bind(r.address).map_err(|e| fail(r, format!("cannot listen on {}: {e}", r.address)))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| fail(r, format!("cannot poll the listener: {e}")))?;
    let mut arrived: Vec<Option<TcpStream>> = (0..r.world).map(|_| None).collect();
    let mut waiting = r.world - 1;
    while waiting > 0 {
        let now = Instant::now();
        if now >= deadline {
            let missing: Vec<usize> = (1..r.world).filter(|&k| arrived[k].is_none()).collect();
            let why = format!(
                "ranks {missing:?} did not arrive within {:.1} s (started? the same MASTER_ADDR, \
                 MASTER_PORT and WORLD_SIZE?)",
                r.timeout.as_secs_f64()
            );
            refuse_all(&mut arrived, &why);
            return Err(fail(r, why));
        }
        match listener.accept() {
            Ok((mut stream, from)) => {
                let hello = stream
                    .set_nonblocking(false)
                    .and_then(|_| {
                        stream.set_read_timeout(Some(deadline.saturating_duration_since(now).max(RETRY)))
                    })
                    .and_then(|_| read_hello(&mut stream));
                let (rank, world) = match hello {
                    Ok(h) => h,
                    // Not one of ours (a port scanner, a stale client): ignore it.
                    Err(_) => continue,
                };
                let problem = if world != r.world {
                    Some(format!(
                        "{from} says it is rank {rank} of a world of {world}, not {}",
                        r.world
                    ))
                } else if rank == 0 || rank >= r.world {
                    Some(format!("{from} says it is rank {rank}, outside 1..{}", r.world))
                } else if arrived[rank].is_some() {
                    Some(format!("rank {rank} arrived twice (a second time from {from})"))
                } else {
                    None
                };
                if let Some(why) = problem {
                    let _ = answer_error(&mut stream, &why);
                    refuse_all(&mut arrived, &why);
                    return Err(fail(r, why));
                }
                arrived[rank] = Some(stream);
                waiting -= 1;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(RETRY.min(Duration::from_millis(5))),
            Err(e) => return Err(fail(r, format!("accepting a connection failed: {e}"))),
        }
    }
    for (k, stream) in arrived.iter_mut().enumerate() {
        if let Some(s) = stream {
            let mut message = vec![0u8];
            message.extend_from_slice(&payload);
            s.write_all(&message)
                .map_err(|e| fail(r, format!("rank {k} arrived but is gone now: {e}")))?;
        }
    }
    Ok(payload)
}

/// Tells every rank that arrived why the rendezvous failed.
fn refuse_all(arrived: &mut [Option<TcpStream>], why: &str) {
    for s in arrived.iter_mut().flatten() {
        let _ = answer_error(s, why);
    }
}

/// Sends a refusal with its reason.
fn answer_error(s: &mut TcpStream, why: &str) -> std::io::Result<()> {
    let mut message = vec![1u8];
    message.extend_from_slice(&(why.len() as u32).to_le_bytes());
    message.extend_from_slice(why.as_bytes());
    s.write_all(&message)
}

/// Reads a hello: `(rank, world)`.
fn read_hello(s: &mut TcpStream) -> std::io::Result<(usize, usize)> {
    let mut buf = [0u8; 16];
    s.read_exact(&mut buf)?;
    if &buf[..8] != MAGIC {
        return Err(std::io::Error::new(ErrorKind::InvalidData, "not a gpukern hello"));
    }
    let word = |at: usize| u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
    Ok((word(8), word(12)))
}

/// Any other rank: connect to rank 0 (trying again while it is not listening yet), say hello,
/// wait for the answer.
fn join(r: &Rendezvous, deadline: Instant) -> Result<[u8; PAYLOAD]> {
    let mut stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(fail(
                r,
                format!(
                    "rank 0 did not listen at {} within {:.1} s",
                    r.address,
                    r.timeout.as_secs_f64()
                ),
            ));
        }
        match TcpStream::connect_timeout(&r.address, left.min(Duration::from_secs(1))) {
            Ok(s) => break s,
            Err(_) => thread::sleep(RETRY.min(left)),
        }
    };
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&(r.rank as u32).to_le_bytes());
    hello.extend_from_slice(&(r.world as u32).to_le_bytes());
    stream
        .write_all(&hello)
        .map_err(|e| fail(r, format!("sending the hello to rank 0 failed: {e}")))?;
    let left = deadline.saturating_duration_since(Instant::now()) + GRACE;
    stream
        .set_read_timeout(Some(left))
        .map_err(|e| fail(r, format!("cannot wait on the connection: {e}")))?;
    let lost = |e: std::io::Error| match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => fail(
            r,
            format!(
                "rank 0 did not answer within {:.1} s (another rank missing?)",
                (r.timeout + GRACE).as_secs_f64()
            ),
        ),
        _ => fail(
            r,
            format!("rank 0 closed the connection before answering (it failed or died): {e}"),
        ),
    };
    let mut status = [0u8; 1];
    stream.read_exact(&mut status).map_err(lost)?;
    if status[0] == 0 {
        let mut payload = [0u8; PAYLOAD];
        stream.read_exact(&mut payload).map_err(lost)?;
        return Ok(payload);
    }
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(lost)?;
    let mut why = vec![0u8; u32::from_le_bytes(len).min(1 << 16) as usize];
    stream.read_exact(&mut why).map_err(lost)?;
    Err(fail(
        r,
        format!("rank 0 refused: {}", String::from_utf8_lossy(&why)),
    ))
}
