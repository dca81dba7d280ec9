//! `setmaxnreg`: a warpgroup lowers (`dec`) or raises (`inc`) its registers per thread; the
//! registers one releases go to a pool of the block that the others' increases draw from, and an
//! increase the pool cannot cover waits until it can (on a GPU, forever if the counts do not add
//! up: the simulator reports that as a deadlock).
//!
//! What the block holds at its start is what `ptxas` gives an entry with launch bounds of the
//! block's size and one block per multiprocessor, which `setmaxnreg` needs: the 64 Ki registers of
//! a multiprocessor over the block's threads (warpgroups of 128), a multiple of 8, at most 256.

use super::clock::MAX_WARPGROUPS;
use super::violation;
use crate::sim::{Rule, Violation};

/// Registers of one multiprocessor (sm_90).
const REGISTER_FILE: u32 = 64 * 1024;
/// Threads of a warpgroup.
const WARPGROUP: u32 = 128;

/// The outcome of a `setmaxnreg`.
pub(crate) enum Grant {
    /// Done.
    Done,
    /// An increase the pool cannot cover yet.
    Wait,
}

/// The registers of one block's warpgroups.
pub(crate) struct Registers {
    /// Per thread at the start.
    at_entry: u32,
    /// Per thread now, by warpgroup.
    current: [u32; MAX_WARPGROUPS],
    /// Released by decreases and not yet taken by increases.
    pool: u32,
    /// Warpgroups of the block.
    warpgroups: usize,
}

impl Registers {
    /// The registers of a block of `threads` threads at its start.
    pub(crate) fn new(threads: u32) -> Self {
        let warpgroups = threads.div_ceil(WARPGROUP).max(1);
        let at_entry = (REGISTER_FILE / (warpgroups * WARPGROUP) / 8 * 8).min(256);
        Registers {
            at_entry,
            current: [at_entry; MAX_WARPGROUPS],
            pool: 0,
            warpgroups: warpgroups as usize,
        }
    }

    /// Warpgroup `wg` asks for `count` registers per thread (`inc` or `dec`).
    pub(crate) fn request(&mut self, wg: usize, inc: bool, count: u32) -> Result<Grant, Violation> {
        let now = self.current[wg.min(MAX_WARPGROUPS - 1)];
        if inc && count < now || !inc && count > now {
            return Err(violation(
                Rule::Setmaxnreg,
                format!(
                    "setmaxnreg.{} to {count} registers per thread in warpgroup {wg}, which holds \
                     {now}: an increase must not lower the count, a decrease must not raise it",
                    if inc { "inc" } else { "dec" }
                ),
            ));
        }
        if !inc {
            self.pool += (now - count) * WARPGROUP;
            self.current[wg] = count;
            return Ok(Grant::Done);
        }
        let need = (count - now) * WARPGROUP;
        if need > self.pool {
            return Ok(Grant::Wait);
        }
        self.pool -= need;
        self.current[wg] = count;
        Ok(Grant::Done)
    }

    /// Why warpgroup `wg`'s increase to `count` cannot be covered, for a deadlock report.
    pub(crate) fn describe_wait(&self, wg: usize, count: u32) -> String {
        let held: Vec<String> = (0..self.warpgroups)
            .map(|w| format!("warpgroup {w}: {}", self.current[w]))
            .collect();
        let need = count.saturating_sub(self.current[wg]) * WARPGROUP;
        format!(
            "setmaxnreg.inc to {count} registers per thread in warpgroup {wg} needs {} registers \
             more than the other warpgroups released: the block started with {} per thread ({} of \
             the {REGISTER_FILE}), holds now (per thread) {}, {} released and not taken; the \
             counts do not add up to the block's registers",
            need.saturating_sub(self.pool),
            self.at_entry,
            self.at_entry * WARPGROUP * self.warpgroups as u32,
            held.join(", "),
            self.pool
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Grant, Registers};

    #[test]
    fn increases_draw_on_what_decreases_released() {
        // 384 threads: 168 each at entry (64 Ki / 384, down to a multiple of 8).
        let mut r = Registers::new(384);
        assert!(matches!(r.request(1, true, 232), Ok(Grant::Wait)));
        assert!(matches!(r.request(0, false, 40), Ok(Grant::Done)));
        assert!(matches!(r.request(1, true, 232), Ok(Grant::Done)));
        assert!(matches!(r.request(2, true, 240), Ok(Grant::Wait)));
        assert!(matches!(r.request(2, true, 232), Ok(Grant::Done)));
        assert!(r.request(2, false, 240).is_err());
    }
}
