//! Where a record was measured: the commit, the driver and the time. Shared by the bench
//! (`examples/bench/record.rs`) and `examples/llama.rs`, whose records carry the same fields.

use std::time::{SystemTime, UNIX_EPOCH};

/// The commit: `GPUKERN_GIT_REV`, else `git rev-parse --short HEAD`, else "unknown".
pub fn git_rev() -> String {
    if let Ok(rev) = std::env::var("GPUKERN_GIT_REV")
        && !rev.trim().is_empty()
    {
        return rev.trim().to_string();
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The driver: the kernel module's version (from /proc/driver/nvidia/version) and the CUDA
/// version the driver supports, e.g. "580.159.04 (CUDA 13.0)". peers.py builds the same string.
pub fn driver_version() -> String {
    let module = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|text| {
            // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release ..."
            let line = text.lines().next()?.to_string();
            let after = line.split("Kernel Module").nth(1)?;
            after
                .split_whitespace()
                .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .map(str::to_string)
        });
    let mut cuda: std::ffi::c_int = 0;
    // SAFETY: the driver library is loaded (a context exists); writes one int.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut cuda) };
    let cuda = (status == cudarc::driver::sys::CUresult::CUDA_SUCCESS)
        .then(|| format!("CUDA {}.{}", cuda / 1000, (cuda % 1000) / 10));
    match (module, cuda) {
        (Some(m), Some(c)) => format!("{m} ({c})"),
        (Some(m), None) => m,
        (None, Some(c)) => c,
        (None, None) => "unknown".to_string(),
    }
}

/// The current UTC time, ISO 8601 to the second.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
