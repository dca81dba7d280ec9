//! Warpgroup-collective instructions (`.sync.aligned`: `wgmma.fence`, `mma_async`,
//! `commit_group`, `wait_group`, `setmaxnreg`) must be executed by every thread of the warpgroup,
//! the same ones in the same order. The simulator runs the threads one after another, so it
//! compares instead: each thread's `n`-th such instruction (its text and operands) with the first
//! one any thread of its warpgroup executed as its `n`-th, and at the block's end, finds those that
//! not every thread executed.

use std::collections::HashMap;
use std::panic::Location;

use super::clock::MAX_WARPGROUPS;
use super::violation;
use crate::sim::{Rule, Violation};

/// The first execution of one instruction of a warpgroup's sequence.
struct Entry {
    /// The instruction and its operands.
    text: String,
    /// The thread that executed it first, and where.
    tid: u32,
    at: &'static Location<'static>,
    /// Threads that executed it so far.
    seen: u32,
}

/// The sequences of one kind of warpgroup instruction (see the module documentation).
pub(crate) struct Aligned {
    /// What the instructions are called in reports.
    kind: &'static str,
    rule: Rule,
    /// Per warpgroup, by position: the entries not yet executed by every thread.
    logs: [HashMap<u64, Entry>; MAX_WARPGROUPS],
    /// Instructions each thread executed.
    done: HashMap<u32, u64>,
}

impl Aligned {
    /// No instruction executed yet; `kind` and `rule` name them in reports.
    pub(crate) fn new(kind: &'static str, rule: Rule) -> Self {
        Aligned {
            kind,
            rule,
            logs: Default::default(),
            done: HashMap::new(),
        }
    }

    /// Thread `tid` of a warpgroup of `members` threads executes `text` at `at`: an error if the
    /// instruction at this position of its warpgroup's sequence is another one.
    pub(crate) fn execute(
        &mut self,
        tid: u32,
        members: u32,
        text: String,
        at: &'static Location<'static>,
    ) -> Result<(), Violation> {
        let wg = tid as usize / 128;
        let position = *self.done.get(&tid).unwrap_or(&0);
        self.done.insert(tid, position + 1);
        let Some(log) = self.logs.get_mut(wg) else {
            return Ok(());
        };
        match log.get_mut(&position) {
            None => {
                if members > 1 {
                    log.insert(
                        position,
                        Entry {
                            text,
                            tid,
                            at,
                            seen: 1,
                        },
                    );
                }
                Ok(())
            }
            Some(entry) if entry.text != text => Err(violation(
                self.rule,
                format!(
                    "this thread's {} #{position} is `{text}` at {at}, thread {}'s of the same \
                     warpgroup `{}` at {}: every thread of a warpgroup executes the same {} in \
                     the same order (.sync.aligned)",
                    self.kind, entry.tid, entry.text, entry.at, self.kind
                ),
            )),
            Some(entry) => {
                entry.seen += 1;
                if entry.seen >= members {
                    log.remove(&position);
                }
                Ok(())
            }
        }
    }

    /// Once every thread of the block returned: an instruction some thread of its warpgroup
    /// executed and another never did (the lowest position of the lowest warpgroup).
    pub(crate) fn leftover(&self, threads: u32) -> Option<(u32, Violation)> {
        for (wg, log) in self.logs.iter().enumerate() {
            let Some((&position, entry)) = log.iter().min_by_key(|(p, _)| **p) else {
                continue;
            };
            let first = wg as u32 * 128;
            let members = first..threads.min(first + 128);
            let skipped = members
                .clone()
                .find(|t| self.done.get(t).copied().unwrap_or(0) <= position)
                .unwrap_or(first);
            let message = format!(
                "thread {} executed {} #{position} `{}` at {}, and this thread of its warpgroup \
                 returned after {} of them: every thread of a warpgroup executes the same {} \
                 (.sync.aligned; a {} under a condition that differs between its warps skips it \
                 on some)",
                entry.tid,
                self.kind,
                entry.text,
                entry.at,
                self.done.get(&skipped).copied().unwrap_or(0),
                self.kind,
                self.kind
            );
            return Some((skipped, violation(self.rule, message)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::panic::Location;

    use super::Aligned;
    use crate::sim::Rule;

    #[test]
    fn threads_of_a_warpgroup_must_agree() {
        let here = Location::caller();
        let mut a = Aligned::new("wgmma instruction", Rule::WgmmaOrder);
        a.execute(0, 2, "fence".into(), here).unwrap();
        a.execute(0, 2, "wait 0".into(), here).unwrap();
        a.execute(1, 2, "fence".into(), here).unwrap();
        assert!(a.execute(1, 2, "wait 1".into(), here).is_err());
        let mut b = Aligned::new("wgmma instruction", Rule::WgmmaOrder);
        b.execute(0, 2, "fence".into(), here).unwrap();
        b.execute(1, 2, "fence".into(), here).unwrap();
        assert!(b.leftover(2).is_none());
        b.execute(0, 2, "wait 0".into(), here).unwrap();
        assert_eq!(b.leftover(2).map(|(t, _)| t), Some(1));
    }
}
