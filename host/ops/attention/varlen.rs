//! Variable-length batches ([`VarlenMask`], FlashAttention's `cu_seqlens`): sequences of
//! different lengths packed one after another along the sequence axis of a batch of one, each
//! query row seeing the keys of its own sequence only (and, within it, the causal or sliding
//! window rule, aligned bottom-right per sequence).
//!
//! No kernel of its own: each query row's keys are one interval of the packed keys, and the
//! intervals move right from one row to the next (a sequence's rows see its keys only, and the
//! sequences follow each other), which is what the document mask's kernels read
//! (`gpukern_device::attention::Document`, one record of two i32 per row). So a varlen call is
//! a batch-one call of the shipped kernels with those records: tiles that no row of theirs sees
//! are skipped, and a tile that two sequences share is cut at the boundary.

use super::plan::OP;
use crate::buffer::DeviceVec;
use crate::device::Gpu;
use crate::error::{Error, Result};

/// The sequences of a packed variable-length batch on the device, for
/// [`AttentionMask::Varlen`](super::AttentionMask::Varlen): built once by [`Gpu::varlen_mask`] from the cumulative sequence
/// offsets of the queries and of the keys, with the rule inside each sequence (none, causal or a
/// sliding window).
///
/// `q` is then `[1, total_q, heads, head_dim]` (the packed `[total_q, heads, head_dim]` of
/// FlashAttention's varlen API), `k` and `v` `[1, total_k, kv_heads, head_dim]`; the output is
/// `[1, total_q, heads, head_dim]` and the log-sum-exp `[1, heads, total_q]`.
pub struct VarlenMask {
    data: DeviceVec<i32>,
    cu_seqlens_q: Vec<usize>,
    cu_seqlens_k: Vec<usize>,
    within: VarlenRule,
}

/// The rule inside each sequence of a [`VarlenMask`], in positions local to the sequence (row
/// `i` of a sequence of `lq` queries and `lk` keys at position `p = i + lk - lq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarlenRule {
    /// Every key of the sequence.
    All,
    /// The keys `j <= p`.
    Causal,
    /// The keys `p - window < j <= p`.
    Window(usize),
}

impl VarlenRule {
    /// The keys `lo..hi` (local, clamped to `0..lk`, `lo <= hi`) that row `i` of a sequence of
    /// `lq` queries and `lk` keys sees.
    fn keys(self, i: usize, lq: usize, lk: usize) -> (usize, usize) {
        // Position of the row among the keys, as i128: `lk - lq` may be negative.
        let p = i as i128 + lk as i128 - lq as i128;
        let clamp = |x: i128| x.clamp(0, lk as i128) as usize;
        match self {
            VarlenRule::All => (0, lk),
            VarlenRule::Causal => (0, clamp(p + 1)),
            VarlenRule::Window(w) => {
                let hi = clamp(p + 1);
                (clamp(p + 1 - w as i128).min(hi), hi)
            }
        }
    }
}

impl std::fmt::Debug for VarlenMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VarlenMask {{ sequences: {}, total_q: {}, total_k: {}, within: {:?} }}",
            self.sequences(),
            self.total_q(),
            self.total_k(),
            self.within
        )
    }
}

impl PartialEq for VarlenMask {
    /// The same mask (the same device buffer).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl VarlenMask {
    /// The number of sequences.
    pub fn sequences(&self) -> usize {
        self.cu_seqlens_q.len() - 1
    }

    /// The query rows of all sequences: `cu_seqlens_q`'s last entry.
    pub fn total_q(&self) -> usize {
        self.cu_seqlens_q[self.sequences()]
    }

    /// The keys of all sequences: `cu_seqlens_k`'s last entry.
    pub fn total_k(&self) -> usize {
        self.cu_seqlens_k[self.sequences()]
    }

    /// The cumulative query offsets (`sequences + 1` entries from 0).
    pub fn cu_seqlens_q(&self) -> &[usize] {
        &self.cu_seqlens_q
    }

    /// The cumulative key offsets (`sequences + 1` entries from 0).
    pub fn cu_seqlens_k(&self) -> &[usize] {
        &self.cu_seqlens_k
    }

    /// Whether packed query row `i` sees packed key `j` (both inside the totals): the same
    /// sequence, and the rule within it. What the kernels compute, written out for references.
    pub fn keeps(&self, i: usize, j: usize) -> bool {
        let b = self.cu_seqlens_q.partition_point(|&c| c <= i) - 1;
        let (q0, q1) = (self.cu_seqlens_q[b], self.cu_seqlens_q[b + 1]);
        let (k0, k1) = (self.cu_seqlens_k[b], self.cu_seqlens_k[b + 1]);
        if !(k0..k1).contains(&j) {
            return false;
        }
        let (lq, lk) = (q1 - q0, k1 - k0);
        let p = (i - q0) as i128 + lk as i128 - lq as i128;
        let j = (j - k0) as i128;
        match self.within {
            VarlenRule::All => true,
            VarlenRule::Causal => j <= p,
            VarlenRule::Window(w) => j <= p && j > p - w as i128,
        }
    }

    /// The record buffer the kernels read (`document_record(total_q)` i32).
    pub(crate) fn data(&self) -> &DeviceVec<i32> {
        &self.data
    }
}

/// The kernels' records for the packed rows: per query row the first key it sees and the one
/// past its last, in packed key indices (`[k0, k0)` for a row that sees none, `k0` its sequence's
/// first key). Errors name the rule broken: offsets of different counts, not starting at 0, or
/// decreasing; totals past i32.
pub(crate) fn varlen_records(
    cu_seqlens_q: &[usize],
    cu_seqlens_k: &[usize],
    within: VarlenRule,
) -> std::result::Result<Vec<i32>, String> {
    if cu_seqlens_q.is_empty() || cu_seqlens_q.len() != cu_seqlens_k.len() {
        return Err(format!(
            "cu_seqlens_q ({} entries) and cu_seqlens_k ({}) hold the same number of offsets, \
             sequences + 1 (at least 1)",
            cu_seqlens_q.len(),
            cu_seqlens_k.len()
        ));
    }
    for (name, cu) in [("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)] {
        if cu[0] != 0 {
            return Err(format!("{name} starts at 0, not {}", cu[0]));
        }
        if let Some(b) = cu.windows(2).position(|w| w[1] < w[0]) {
            return Err(format!(
                "{name} never decreases: entry {} is {} after {}",
                b + 1,
                cu[b + 1],
                cu[b]
            ));
        }
        let total = cu[cu.len() - 1];
        if i32::try_from(total).is_err() {
            return Err(format!("{name} totals {total} tokens: at most {}", i32::MAX));
        }
    }
    let mut data = Vec::with_capacity(2 * cu_seqlens_q[cu_seqlens_q.len() - 1]);
    for b in 0..cu_seqlens_q.len() - 1 {
        let lq = cu_seqlens_q[b + 1] - cu_seqlens_q[b];
        let (k0, lk) = (cu_seqlens_k[b], cu_seqlens_k[b + 1] - cu_seqlens_k[b]);
        for i in 0..lq {
            let (lo, hi) = within.keys(i, lq, lk);
            // Both at most total_k, which fits in i32 (checked above).
            data.extend_from_slice(&[(k0 + lo) as i32, (k0 + hi) as i32]);
        }
    }
    Ok(data)
}

impl VarlenMask {
    /// The records of `cu_seqlens_q`, `cu_seqlens_k` and `within` uploaded to `gpu`
    /// ([`Gpu::varlen_mask`] checks `within`).
    ///
    /// Errors: [`Error::InvalidArgument`] for offsets [`varlen_records`] refuses; upload errors.
    pub(crate) fn new(
        gpu: &Gpu,
        cu_seqlens_q: &[usize],
        cu_seqlens_k: &[usize],
        within: VarlenRule,
    ) -> Result<Self> {
        let data = varlen_records(cu_seqlens_q, cu_seqlens_k, within)
            .map_err(|detail| Error::InvalidArgument { op: OP, detail })?;
        let data = if data.is_empty() {
            gpu.upload(&[0i32])?
        } else {
            gpu.upload(&data)?
        };
        Ok(VarlenMask {
            data,
            cu_seqlens_q: cu_seqlens_q.to_vec(),
            cu_seqlens_k: cu_seqlens_k.to_vec(),
            within,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row's interval from the records against [`VarlenRule::keys`] written per key, and
    /// the intervals moving right (what the kernels' tile classification assumes).
    #[test]
    fn records_are_the_rule_and_move_right() {
        let cu_q = [0, 5, 5, 12, 13, 20];
        let cu_k = [0, 9, 12, 12, 20, 23];
        for within in [
            VarlenRule::All,
            VarlenRule::Causal,
            VarlenRule::Window(1),
            VarlenRule::Window(3),
        ] {
            let data = varlen_records(&cu_q, &cu_k, within).expect("valid offsets");
            assert_eq!(data.len(), 2 * 20);
            let mut last = (0, 0);
            for b in 0..cu_q.len() - 1 {
                let (lq, lk) = (cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]);
                for i in 0..lq {
                    let row = cu_q[b] + i;
                    let (lo, hi) = (data[2 * row], data[2 * row + 1]);
                    assert!(lo <= hi && lo >= last.0 && hi >= last.1, "{within:?} row {row}");
                    last = (lo, hi);
                    let p = i as i64 + lk as i64 - lq as i64;
                    for j in 0..lk {
                        let jj = j as i64;
                        let want = match within {
                            VarlenRule::All => true,
                            VarlenRule::Causal => jj <= p,
                            VarlenRule::Window(w) => jj <= p && jj > p - w as i64,
                        };
                        let packed = (cu_k[b] + j) as i32;
                        assert_eq!(want, (lo..hi).contains(&packed), "{within:?} row {row} key {j}");
                    }
                    if lk == 0 || (within != VarlenRule::All && p < 0) {
                        assert_eq!(lo, hi, "{within:?} row {row} sees no key");
                    }
                }
            }
        }
    }

    #[test]
    fn bad_offsets_are_refused() {
        let all = VarlenRule::All;
        assert!(varlen_records(&[], &[], all).is_err());
        assert!(varlen_records(&[0, 3], &[0, 3, 4], all).is_err());
        assert!(varlen_records(&[1, 3], &[0, 3], all).is_err());
        assert!(varlen_records(&[0, 3, 2], &[0, 3, 4], all).is_err());
        assert!(varlen_records(&[0, 1usize << 31], &[0, 3], all).is_err());
        assert_eq!(varlen_records(&[0], &[0], all), Ok(vec![]));
    }
}
