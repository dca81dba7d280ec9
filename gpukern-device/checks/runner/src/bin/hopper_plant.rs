//! Launches one planted Hopper bug (or its correct twin) of `gpukern-device/checks/hopper` on CUDA
//! device 0, checks what it wrote against what the twin writes, and says what happened on one
//! line, for `scripts/sanitize-hopper.sh` to run under each compute-sanitizer tool.
//!
//! ```text
//! hopper_plant --list          every plant and twin: `<name> <rule> <kernel>` per line
//! hopper_plant NAME            runs it; prints `outcome: ...`
//! ```
//!
//! Exit status: 0 the kernel ran and wrote the twin's results; 1 it ran and wrote something else;
//! 2 a CUDA error (the launch, the kernel, the synchronisation); 3 the driver refused the tensor
//! map; 4 a usage error. A hang is the caller's to time out.

#[path = "hopper_plant/cuda.rs"]
mod cuda;
#[path = "hopper_plant/plants.rs"]
mod plants;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--list") => {
            for p in plants::PLANTS {
                println!("{} {} {}", p.name, p.rule, p.kernel);
            }
            ExitCode::SUCCESS
        }
        Some(name) => match plants::PLANTS.iter().find(|p| p.name == name) {
            Some(plant) => {
                let outcome = plants::run(plant);
                println!("outcome: {outcome}");
                ExitCode::from(outcome.status())
            }
            None => {
                eprintln!("hopper_plant: no plant {name:?} (see --list)");
                ExitCode::from(4)
            }
        },
        None => {
            eprintln!("usage: hopper_plant --list | hopper_plant NAME");
            ExitCode::from(4)
        }
    }
}
