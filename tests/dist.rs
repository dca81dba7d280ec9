//! `gpukern::dist`: processes that meet and work together.
//!
//! * `store::*`: the rendezvous with several real processes on the loopback (this binary runs
//!   itself as the ranks, `GPUKERN_DIST_CHILD` telling a child what to do): every rank gets rank
//!   0's payload; a rank that never arrives is an error on every rank that did, within the
//!   timeout, rank 0 naming the one missing; a rank of another world size is refused; a
//!   child started late still meets the others.
//! * `env::*`: torchrun's variables read, and each missing or malformed one named.
//! * `sim::dist::*`: the collectives on the simulator's world of one.
//! * `cuda::dist::*`: the same on CUDA device 0 through NCCL (a world of one process; ignored
//!   without a GPU, like every CUDA trial). The trials of two or more GPUs need a machine of
//!   several and are not here (see the README).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpukern::dist::{Communicator, PAYLOAD, ReduceOp, Rendezvous, share};
use gpukern::{Error, Gpu, bf16};
use libtest_mimic::{Arguments, Failed, Trial};

/// The variable that makes this binary a rank of a store trial.
const CHILD: &str = "GPUKERN_DIST_CHILD";

fn main() {
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(child());
    }
    let args = Arguments::from_args();
    let opened = Gpu::new(0);
    let cuda_ignored = matches!(&opened, Err(e) if e.is_no_gpu())
        && std::env::var("GPUKERN_REQUIRE_GPU").as_deref() != Ok("1");
    let mut trials = vec![
        Trial::test("store::every_rank_gets_rank_0s_payload", || store_exchange(4)),
        Trial::test("store::a_missing_rank_is_an_error_on_every_rank", missing_rank),
        Trial::test("store::a_rank_of_another_world_is_refused", wrong_world),
        Trial::test("store::a_late_rank_still_meets_the_others", late_rank),
        Trial::test("env::torchrun_variables", env_variables),
        Trial::test("sim::dist::collectives_of_a_world_of_one", || {
            collectives(&Gpu::simulator())
        }),
        Trial::test("sim::dist::refusals", || refusals(&Gpu::simulator())),
    ];
    trials.push(Trial::test("sim::dist::an_all_reduce_in_a_graph", || {
        captured(&Gpu::simulator())
    }));
    // Each CUDA trial opens a handle of its own: the trials run on parallel threads, and a handle
    // (its stream) that one thread is capturing cannot serve another thread's work meanwhile.
    drop(opened);
    trials.push(
        Trial::test("cuda::dist::collectives_of_a_world_of_one", || {
            collectives(&Gpu::new(0).map_err(|e| Failed::from(e.to_string()))?)
        })
        .with_ignored_flag(cuda_ignored),
    );
    trials.push(
        Trial::test("cuda::dist::an_all_reduce_in_a_graph", || {
            captured(&Gpu::new(0).map_err(|e| Failed::from(e.to_string()))?)
        })
        .with_ignored_flag(cuda_ignored),
    );
    libtest_mimic::run(&args, trials).exit();
}

/// A free port on the loopback (bound, then released for the rank 0 to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(29500)
}

/// Starts this binary as rank `rank` of `world` on `port`.
fn spawn(rank: usize, world: usize, port: u16, timeout_s: f64) -> std::io::Result<Child> {
    Command::new(std::env::current_exe()?)
        .env(CHILD, "store")
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env(gpukern::dist::TIMEOUT_ENV, timeout_s.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// What a child printed and whether it succeeded, after it exits.
fn finish(mut child: Child) -> (bool, String) {
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut out);
    }
    (ok, out)
}

/// A rank of a store trial: meets the others from the environment and prints the payload it got
/// (`payload <hex>`) or the error (`error <message>`). Rank 0's payload is its pid's bytes over
/// and over, so that two jobs cannot be confused.
fn child() -> i32 {
    let r = match Rendezvous::from_env() {
        Ok(r) => r,
        Err(e) => {
            println!("error {e}");
            return 1;
        }
    };
    let payload = (r.rank == 0).then(|| {
        let pid = std::process::id().to_le_bytes();
        std::array::from_fn::<u8, PAYLOAD, _>(|i| pid[i % 4] ^ i as u8)
    });
    match share(&r, payload) {
        Ok(p) => {
            println!(
                "payload {}",
                p.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            0
        }
        Err(e) => {
            println!("error {e}");
            1
        }
    }
}

/// The payload line of a child's output.
fn payload_of(out: &str) -> Option<&str> {
    out.lines().find_map(|l| l.strip_prefix("payload "))
}

/// `world` ranks meet; every one prints rank 0's payload.
fn store_exchange(world: usize) -> Result<(), Failed> {
    let port = free_port();
    let children = (0..world)
        .map(|r| spawn(r, world, port, 20.0))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| Failed::from(e.to_string()))?;
    let results: Vec<(bool, String)> = children.into_iter().map(finish).collect();
    let zero = payload_of(&results[0].1).ok_or_else(|| format!("rank 0: {}", results[0].1))?;
    for (k, (ok, out)) in results.iter().enumerate() {
        if !ok || payload_of(out) != Some(zero) {
            return Err(format!("rank {k} did not get rank 0's payload: {out}").into());
        }
    }
    Ok(())
}

/// A world of 3 where rank 2 never starts: ranks 0 and 1 fail within the timeout (and a margin),
/// rank 0 naming rank 2, rank 1 hearing rank 0's reason.
fn missing_rank() -> Result<(), Failed> {
    let port = free_port();
    let start = Instant::now();
    let children = [spawn(0, 3, port, 1.5), spawn(1, 3, port, 1.5)];
    let results: Vec<(bool, String)> = children
        .into_iter()
        .map(|c| c.map(finish).unwrap_or((false, "did not start".into())))
        .collect();
    let took = start.elapsed();
    if took > Duration::from_secs(8) {
        return Err(format!("the ranks took {took:?} to give up on a 1.5 s timeout").into());
    }
    let (zero_ok, zero) = &results[0];
    let (one_ok, one) = &results[1];
    if *zero_ok || !zero.contains("ranks [2] did not arrive") {
        return Err(format!("rank 0 should name rank 2 as missing: {zero}").into());
    }
    if *one_ok || !one.contains("rank 0 refused") || !one.contains("[2]") {
        return Err(format!("rank 1 should hear rank 0's reason: {one}").into());
    }
    Ok(())
}

/// A rank that says its world has 5 ranks, in a job of 2: both fail, saying so.
fn wrong_world() -> Result<(), Failed> {
    let port = free_port();
    let zero = spawn(0, 2, port, 5.0).map_err(|e| e.to_string())?;
    let stray = spawn(1, 5, port, 5.0).map_err(|e| e.to_string())?;
    let (zero_ok, zero) = finish(zero);
    let (stray_ok, stray) = finish(stray);
    if zero_ok || stray_ok || !zero.contains("a world of 5, not 2") || !stray.contains("a world of 5, not 2")
    {
        return Err(format!("both should refuse the world of 5: rank 0: {zero}; stray: {stray}").into());
    }
    Ok(())
}

/// Rank 1 starts first and waits for rank 0, which starts a second later.
fn late_rank() -> Result<(), Failed> {
    let port = free_port();
    let one = spawn(1, 2, port, 10.0).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(1000));
    let zero = spawn(0, 2, port, 10.0).map_err(|e| e.to_string())?;
    let (a, b) = (finish(zero), finish(one));
    match (payload_of(&a.1), payload_of(&b.1)) {
        (Some(x), Some(y)) if x == y => Ok(()),
        _ => Err(format!("rank 0: {}; rank 1: {}", a.1, b.1).into()),
    }
}

/// torchrun's variables: read as given; each one missing or malformed named.
fn env_variables() -> Result<(), Failed> {
    let vars = |list: &[(&str, &str)]| {
        let list: Vec<(String, String)> = list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name: &str| list.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    };
    let full = [
        ("RANK", "2"),
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29511"),
        ("LOCAL_RANK", "0"),
    ];
    let r = Rendezvous::from_vars(vars(&full)).map_err(|e| e.to_string())?;
    if (r.rank, r.world, r.local_rank, r.address.port()) != (2, 4, 0, 29511)
        || r.timeout != gpukern::dist::DEFAULT_TIMEOUT
    {
        return Err(format!("read {r:?}").into());
    }
    for (drop, needle) in [
        ("RANK", "RANK is not set"),
        ("MASTER_ADDR", "MASTER_ADDR is not set"),
        ("MASTER_PORT", "MASTER_PORT is not set"),
    ] {
        let partial: Vec<(&str, &str)> = full.iter().copied().filter(|(k, _)| *k != drop).collect();
        match Rendezvous::from_vars(vars(&partial)) {
            Err(e @ Error::InvalidArgument { .. }) if e.to_string().contains(needle) => {}
            other => return Err(format!("without {drop}: {other:?}").into()),
        }
    }
    for (bad, needle) in [
        (("RANK", "4"), "rank 4 of a world of 4"),
        (("WORLD_SIZE", "x"), "WORLD_SIZE=\"x\" is not"),
        (("MASTER_PORT", "70000"), "not a port"),
        ((gpukern::dist::TIMEOUT_ENV, "-1"), "not a positive number"),
    ] {
        let mut edited: Vec<(&str, &str)> = full.iter().copied().filter(|(k, _)| *k != bad.0).collect();
        edited.push(bad);
        match Rendezvous::from_vars(vars(&edited)) {
            Err(e) if e.to_string().contains(needle) => {}
            other => return Err(format!("with {bad:?}: {other:?}").into()),
        }
    }
    Ok(())
}

/// A communicator of a world of one on `gpu`.
fn world_of_one(gpu: &Gpu) -> Result<Communicator, Failed> {
    let r = Rendezvous::new(0, 1, ("127.0.0.1", free_port())).map_err(|e| e.to_string())?;
    Communicator::new(gpu, &r).map_err(|e| Failed::from(e.to_string()))
}

/// Every collective of a world of one: what it must be with one rank (the data itself, the mean
/// of one, the gather of one chunk), in f32 and bf16, a group of a send and a receive to itself,
/// a split into itself and into nothing; read after `synchronize`.
fn collectives(gpu: &Gpu) -> Result<(), Failed> {
    let e = |e: Error| Failed::from(e.to_string());
    let comm = world_of_one(gpu)?;
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg] {
        let mut v = gpu.upload(&x).map_err(e)?;
        comm.all_reduce(&mut v, op).map_err(e)?;
        comm.synchronize().map_err(e)?;
        if v.to_vec().map_err(e)? != x {
            return Err(format!("all_reduce {op:?} of one rank changed the data").into());
        }
    }
    let h: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let input = gpu.upload(&h).map_err(e)?;
    let mut out = gpu.zeros_of::<bf16>(1000).map_err(e)?;
    comm.all_gather(&input, &mut out).map_err(e)?;
    let mut scattered = gpu.zeros_of::<bf16>(1000).map_err(e)?;
    comm.reduce_scatter(&input, &mut scattered, ReduceOp::Sum)
        .map_err(e)?;
    let mut b = gpu.upload(&h).map_err(e)?;
    comm.broadcast(&mut b, 0).map_err(e)?;
    let sent = gpu.upload(&x).map_err(e)?;
    let mut got = gpu.zeros(1000).map_err(e)?;
    comm.group(|c| {
        c.send(&sent, 0)?;
        c.recv(&mut got, 0)
    })
    .map_err(e)?;
    comm.synchronize().map_err(e)?;
    for (what, v) in [
        ("all_gather", &out),
        ("reduce_scatter", &scattered),
        ("broadcast", &b),
    ] {
        if v.to_vec().map_err(e)? != h {
            return Err(format!("{what} of one rank is not its input").into());
        }
    }
    if got.to_vec().map_err(e)? != x {
        return Err("a send to itself did not arrive".into());
    }
    let same = comm
        .split(Some(7), 0)
        .map_err(e)?
        .ok_or("split with a color gave none")?;
    if (same.rank(), same.world()) != (0, 1) {
        return Err(format!("split: rank {} of {}", same.rank(), same.world()).into());
    }
    if comm.split(None, 0).map_err(e)?.is_some() {
        return Err("split with no color joined a group".into());
    }
    Ok(())
}

/// An all-reduce between two kernels captured in a CUDA graph and replayed twice: the
/// collective is part of the graph (a world of one: the data doubled by the kernels only).
fn captured(gpu: &Gpu) -> Result<(), Failed> {
    let e = |e: Error| Failed::from(e.to_string());
    let comm = world_of_one(gpu)?;
    let x = gpu.upload(&[1.5f32; 4096]).map_err(e)?;
    let mut graph = gpu
        .capture_with(x, |g, x| {
            g.increment_by_one(x)?;
            comm.all_reduce(x, ReduceOp::Sum)?;
            g.increment_by_one(x)
        })
        .map_err(e)?;
    graph.launch().map_err(e)?;
    graph.launch().map_err(e)?;
    comm.synchronize().map_err(e)?;
    let got = graph.buffers().to_vec().map_err(e)?;
    if got != vec![5.5f32; 4096] {
        return Err(format!("after two replays: {:?}", &got[..4]).into());
    }
    Ok(())
}

/// Bad input refused before anything is queued: chunk counts, a root or peer outside the world,
/// a world of more than one in the simulator.
fn refusals(gpu: &Gpu) -> Result<(), Failed> {
    let e = |e: Error| Failed::from(e.to_string());
    let comm = world_of_one(gpu)?;
    let a = gpu.upload(&[1.0f32; 8]).map_err(e)?;
    let mut b = gpu.zeros(4).map_err(e)?;
    if !matches!(comm.all_gather(&a, &mut b), Err(Error::ShapeMismatch { .. })) {
        return Err("all_gather into a too-short output was not refused".into());
    }
    if !matches!(
        comm.reduce_scatter(&a, &mut b, ReduceOp::Sum),
        Err(Error::ShapeMismatch { .. })
    ) {
        return Err("reduce_scatter of mismatched chunks was not refused".into());
    }
    let mut c = gpu.zeros(8).map_err(e)?;
    if !matches!(comm.broadcast(&mut c, 1), Err(Error::InvalidArgument { .. })) {
        return Err("a broadcast from rank 1 of a world of one was not refused".into());
    }
    if !matches!(comm.send(&a, 3), Err(Error::InvalidArgument { .. })) {
        return Err("a send to rank 3 of a world of one was not refused".into());
    }
    if gpu.is_simulator() {
        let r = Rendezvous::new(0, 2, ("127.0.0.1", free_port())).map_err(|e| e.to_string())?;
        if !matches!(Communicator::new(gpu, &r), Err(Error::InvalidArgument { .. })) {
            return Err("the simulator took a world of two".into());
        }
    }
    Ok(())
}
