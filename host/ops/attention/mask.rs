//! The masks an attention call may ask for ([`AttentionMask`]): each the host's name for one of
//! `gpukern_device::attention`'s mask types, which the kernels are instantiated with, and its
//! parameters, checked once ([`MaskSpec::new`]).

use std::sync::Arc;

use gpukern_device::attention::{General, document_record};

use super::custom::CustomMask;
use super::kernels::{MaskKernels, MaskKind, MaskLaunch};
use super::plan::{AttentionShape, OP};
use super::varlen::{VarlenMask, VarlenRule};
use crate::buffer::DeviceVec;
use crate::device::{Backend, Gpu};
use crate::error::{Error, Result};
use crate::module::Module;

/// A mask or score modification of attention, compiled into the kernels (the device crate's
/// `gpukern_device::attention::{Causal, SlidingWindow, Alibi, Document, SoftCap}`). Indices are
/// positions in each sequence; the query rows are aligned to the end of the keys (row `i` at
/// position `p = i + kv_len - q_len`), as the causal mask is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum AttentionMask<'a> {
    /// Every row sees every key.
    #[default]
    None,
    /// Row `i` sees the keys `j <= p` (the same as `AttentionOptions::causal`).
    Causal,
    /// Row `i` sees the keys `p - window < j <= p`: itself and the `window - 1` before it
    /// (`window >= 1`; Mistral's and Gemma's local attention).
    SlidingWindow {
        /// Keys a row sees at most.
        window: usize,
    },
    /// ALiBi: the causal mask, and each score plus `slope_h (j - p)` with the paper's slopes
    /// `slope_h = 2^(-8 (h + 1) / heads)`.
    Alibi,
    /// Documents packed in each sequence: a row sees the keys of its own document only
    /// ([`Gpu::document_mask`]; `q_len == kv_len`).
    Document(&'a DocumentMask),
    /// Logit soft-capping (Gemma 2's): each score `s` becomes `cap tanh(s / cap)` (`cap` finite
    /// and above 0), with the causal mask if `causal`.
    SoftCap {
        /// The cap.
        cap: f32,
        /// Also the causal mask.
        causal: bool,
    },
    /// A variable-length batch ([`Gpu::varlen_mask`], FlashAttention's `cu_seqlens`): sequences
    /// packed along the sequence axis of a batch of one, each row seeing its own sequence's keys
    /// under the mask's rule (none, causal or a sliding window, aligned per sequence).
    Varlen(&'a VarlenMask),
    /// A mask of your own ([`CustomMask`]): a type of your kernel crate implementing
    /// `gpukern_device::attention::Mask`, compiled there into the forward's kernels
    /// (`kernels_gpu::attention_mask_kernels!`), with the parameters it reads. The plan runs it
    /// as the shipped masks other than none and causal; the backward takes none.
    Custom(&'a CustomMask<'a>),
}

impl AttentionMask<'_> {
    /// The mask's short name (`none`, `causal`, `sliding_window`, `alibi`, `document`,
    /// `softcap`, `varlen`, or a custom mask's own), the bench's `mask` key.
    pub fn name(&self) -> &'static str {
        match self {
            AttentionMask::None => "none",
            AttentionMask::Causal => "causal",
            AttentionMask::SlidingWindow { .. } => "sliding_window",
            AttentionMask::Alibi => "alibi",
            AttentionMask::Document(_) => "document",
            AttentionMask::SoftCap { .. } => "softcap",
            AttentionMask::Varlen(_) => "varlen",
            AttentionMask::Custom(custom) => custom.name(),
        }
    }
}

/// The documents of a batch of packed sequences on the device, as the kernels read them: for
/// each token the first token of its document and the one past its last
/// (`gpukern_device::attention::Document`), computed once here for every call that uses the
/// mask. A document is a run of tokens with the same id; an id may not come back after another
/// (two runs of one id would be two documents, where FlexAttention's `id[q] == id[kv]` makes
/// them one).
pub struct DocumentMask {
    data: DeviceVec<i32>,
    ids: Vec<i32>,
    batch: usize,
    seq: usize,
}

impl std::fmt::Debug for DocumentMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DocumentMask {{ batch: {}, seq: {} }}", self.batch, self.seq)
    }
}

impl PartialEq for DocumentMask {
    /// The same mask (the same device buffer).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl DocumentMask {
    /// `[batch, seq]`.
    pub fn dims(&self) -> [usize; 2] {
        [self.batch, self.seq]
    }

    /// The ids, `[batch, seq]` row-major (a copy kept on the host).
    pub fn ids(&self) -> &[i32] {
        &self.ids
    }
}

/// The records the kernels read (`document_record(seq)` i32 per batch): for each token the
/// start and end of its run of equal ids. Errors where an id comes back after another, naming
/// the batch and token.
pub(crate) fn document_records(
    ids: &[i32],
    batch: usize,
    seq: usize,
) -> std::result::Result<Vec<i32>, String> {
    let mut data = Vec::with_capacity(batch * document_record(seq));
    if i32::try_from(seq).is_err() {
        return Err(format!(
            "a document mask of {seq} tokens per sequence: at most {}",
            i32::MAX
        ));
    }
    for (b, row) in ids.chunks(seq.max(1)).take(batch).enumerate() {
        let mut seen = std::collections::HashSet::new();
        let mut start = 0;
        while start < row.len() {
            let id = row[start];
            let end = start + row[start..].iter().take_while(|&&x| x == id).count();
            if !seen.insert(id) {
                return Err(format!(
                    "document id {id} of batch {b} comes back at token {start} after another: each document \
                     is one run of tokens"
                ));
            }
            for _ in start..end {
                // Both below `seq`, which fits in i32 (checked above).
                data.extend_from_slice(&[start as i32, end as i32]);
            }
            start = end;
        }
    }
    Ok(data)
}

impl Gpu {
    /// The document mask of `batch` sequences of `seq` tokens from each token's document id
    /// (`ids`, `[batch, seq]` row-major; each document a run of tokens), uploaded once as each
    /// token's document interval, for [`AttentionMask::Document`].
    ///
    /// Errors: [`Error::ShapeMismatch`] unless `ids` holds `batch * seq` ids;
    /// [`Error::InvalidArgument`] for an id that comes back after another in a sequence.
    pub fn document_mask(&self, ids: &[i32], batch: usize, seq: usize) -> Result<DocumentMask> {
        let len = batch.checked_mul(seq).ok_or_else(|| Error::InvalidArgument {
            op: OP,
            detail: format!("a document mask of {batch} x {seq} ids overflows"),
        })?;
        crate::error::same_shape(OP, &[len], &[ids.len()], "the document ids are [batch, seq]")?;
        let data =
            document_records(ids, batch, seq).map_err(|detail| Error::InvalidArgument { op: OP, detail })?;
        let data = if data.is_empty() {
            self.upload(&[0i32])?
        } else {
            self.upload(&data)?
        };
        Ok(DocumentMask {
            data,
            ids: ids.to_vec(),
            batch,
            seq,
        })
    }
}

impl Gpu {
    /// The sequences of a packed variable-length batch (FlashAttention's `cu_seqlens`), uploaded
    /// once as each query row's interval of keys, for [`AttentionMask::Varlen`]:
    /// `cu_seqlens_q[b]..cu_seqlens_q[b + 1]` are sequence `b`'s query rows in the packed `q`,
    /// `cu_seqlens_k[b]..cu_seqlens_k[b + 1]` its keys in `k` and `v`. `within` is the rule inside
    /// each sequence, aligned bottom-right per sequence: [`AttentionMask::None`],
    /// [`AttentionMask::Causal`] or [`AttentionMask::SlidingWindow`]. A sequence with no keys
    /// gives its rows output 0 and log-sum-exp `-inf`.
    ///
    /// Errors: [`Error::InvalidArgument`] for offsets of different counts or none, not starting
    /// at 0 or decreasing, totals past `i32::MAX`, a window of 0, another mask as `within`.
    pub fn varlen_mask(
        &self,
        cu_seqlens_q: &[usize],
        cu_seqlens_k: &[usize],
        within: AttentionMask<'_>,
    ) -> Result<VarlenMask> {
        let invalid = |detail: String| Error::InvalidArgument { op: OP, detail };
        let within = match within {
            AttentionMask::None => VarlenRule::All,
            AttentionMask::Causal => VarlenRule::Causal,
            AttentionMask::SlidingWindow { window: 0 } => {
                return Err(invalid(
                    "a sliding window of 0 keys: the window is at least 1".into(),
                ));
            }
            AttentionMask::SlidingWindow { window } => VarlenRule::Window(window),
            other => {
                return Err(invalid(format!(
                    "a varlen batch takes none, the causal mask or a sliding window within each \
                     sequence, not {}",
                    other.name()
                )));
            }
        };
        VarlenMask::new(self, cu_seqlens_q, cu_seqlens_k, within)
    }
}

/// A dummy buffer for the masks that read none, one per stream handle.
#[derive(Default)]
struct NoData(Option<Arc<DeviceVec<i32>>>);

/// One call's mask, checked: its kernel instance and parameters.
pub(crate) struct MaskSpec<'a> {
    pub(crate) kind: MaskKind,
    /// The device records the mask reads (documents, varlen sequences), if any.
    records: Option<&'a DeviceVec<i32>>,
    int: usize,
    float: f32,
    dummy: Option<Arc<DeviceVec<i32>>>,
    /// A custom mask's kernels, in its crate's module loaded on the call's device.
    custom: Option<(&'a CustomMask<'a>, Module)>,
}

impl<'a> MaskSpec<'a> {
    /// The mask of `options` (the causal flag folded in), checked against the call's shape.
    ///
    /// Errors: [`Error::InvalidArgument`] for the causal flag with another mask, a window of 0,
    /// a cap not finite and above 0, a document mask of another device, a mask other than none
    /// and causal with `q_len + kv_len >= 2^30`;
    /// [`Error::ShapeMismatch`] for a document mask of another batch or length, or with
    /// `q_len != kv_len`; for a varlen mask with a batch other than 1 or totals other than
    /// `q_len` and `kv_len`; [`Error::WrongDevice`] for a custom mask's records on another
    /// device, and the errors of loading its kernel crate ([`Gpu::load`]).
    pub(crate) fn new(
        gpu: &Gpu,
        causal: bool,
        mask: AttentionMask<'a>,
        shape: &AttentionShape,
    ) -> Result<Self> {
        let invalid = |detail: String| Err(Error::InvalidArgument { op: OP, detail });
        let mask = match (causal, mask) {
            (true, AttentionMask::None) => AttentionMask::Causal,
            (true, m) if m != AttentionMask::Causal => {
                return invalid(format!(
                    "causal: true with the {} mask: give one mask (the window and ALiBi masks are causal; \
                     SoftCap takes causal: true; a varlen batch takes its rule in varlen_mask)",
                    m.name()
                ));
            }
            (_, m) => m,
        };
        let (kind, records, int, float) = match mask {
            AttentionMask::None => (MaskKind::None, None, 0, 0.0),
            AttentionMask::Causal => (MaskKind::Causal, None, 0, 0.0),
            AttentionMask::SlidingWindow { window } => {
                if window == 0 {
                    return invalid("a sliding window of 0 keys: the window is at least 1".into());
                }
                (MaskKind::Window, None, window, 0.0)
            }
            AttentionMask::Alibi => (MaskKind::Alibi, None, 0, 0.0),
            AttentionMask::Document(doc) => {
                crate::error::same_shape(
                    OP,
                    &[shape.batch, shape.q_len, shape.kv_len],
                    &[doc.batch, doc.seq, doc.seq],
                    "a document mask's [batch, seq] is q's and k's (q_len == kv_len)",
                )?;
                if !gpu.owns(&doc.data) {
                    return Err(Error::WrongDevice { op: OP });
                }
                (MaskKind::Document, Some(&doc.data), doc.seq, 0.0)
            }
            AttentionMask::SoftCap { cap, causal } => {
                if !(cap.is_finite() && cap > 0.0) {
                    return invalid(format!("the soft cap must be finite and above 0, not {cap}"));
                }
                (MaskKind::SoftCap, None, usize::from(causal), cap)
            }
            // Each row's keys an interval of the packed keys: the document kernels' records,
            // one per query row (`seq` = q_len).
            AttentionMask::Varlen(varlen) => {
                crate::error::same_shape(
                    OP,
                    &[shape.batch, shape.q_len, shape.kv_len],
                    &[1, varlen.total_q(), varlen.total_k()],
                    "a varlen batch is q [1, total_q, heads, head_dim] and k, v [1, total_k, kv_heads, head_dim]",
                )?;
                if !gpu.owns(varlen.data()) {
                    return Err(Error::WrongDevice { op: OP });
                }
                (MaskKind::Document, Some(varlen.data()), varlen.total_q(), 0.0)
            }
            AttentionMask::Custom(custom) => {
                if let Some(data) = custom.data {
                    if !gpu.owns(data) {
                        return Err(Error::WrongDevice { op: OP });
                    }
                }
                (MaskKind::Custom, custom.data, custom.int, custom.float)
            }
        };
        // The masks other than none and causal compute positions in 32 bits.
        if !matches!(kind, MaskKind::None | MaskKind::Causal) && shape.q_len + shape.kv_len >= 1 << 30 {
            return invalid(format!(
                "the {} mask takes q_len + kv_len below 2^30, not {} + {}",
                mask.name(),
                shape.q_len,
                shape.kv_len
            ));
        }
        let dummy = match records {
            Some(_) => None,
            None => Some(no_data(gpu)?),
        };
        let custom = match mask {
            AttentionMask::Custom(custom) => Some((custom, gpu.load(custom.kernels.ptx)?)),
            _ => None,
        };
        Ok(MaskSpec {
            kind,
            records,
            int,
            float,
            dummy,
            custom,
        })
    }

    /// Whether every block tile of the call has the same work (no mask, or the soft cap without
    /// the causal mask): the persistent grid's static share is even.
    pub(crate) fn uniform(&self) -> bool {
        matches!(self.kind, MaskKind::None) || (self.kind == MaskKind::SoftCap && self.int == 0)
    }

    /// Whether the mask is none or the causal one (the backward's kernels take no other).
    pub(crate) fn plain(&self) -> bool {
        matches!(self.kind, MaskKind::None | MaskKind::Causal)
    }

    /// Whether the mask modifies scores (ALiBi, the soft cap: `General::modifies_scores` of the
    /// kinds): the one-kernel backward's masked entries take each kind of modification on
    /// entries of their own ([`MaskSpec::score_is_bias`]).
    pub(crate) fn modifies_scores(&self) -> bool {
        matches!(self.kind, MaskKind::Alibi | MaskKind::SoftCap)
    }

    /// Whether the mask's score modification adds a bias (ALiBi: `General::score_is_bias`), which
    /// the one-kernel backward's masked entries add on lines (the soft cap's bends the scores:
    /// entries of its own).
    pub(crate) fn score_is_bias(&self) -> bool {
        self.kind == MaskKind::Alibi
    }

    /// Whether the Hopper rung's persistent walk snakes for the mask, its rows' keys intervals
    /// that move right: none or causal, or a custom mask whose type says so
    /// ([`MaskKernels`](super::MaskKernels)).
    pub(crate) fn walks(&self) -> bool {
        self.plain() || self.custom.as_ref().is_some_and(|(mask, _)| mask.kernels.walks)
    }

    /// A custom mask's kernels and its crate's module, loaded on the call's device (none for the
    /// shipped masks).
    pub(crate) fn custom(&self) -> Option<(&MaskKernels, &Module)> {
        self.custom.as_ref().map(|(mask, module)| (mask.kernels, module))
    }

    /// The mask as the kernels take it.
    pub(crate) fn launch(&self) -> Result<MaskLaunch<'_>> {
        let data = match (self.records, &self.dummy) {
            (Some(records), _) => records.view(),
            (None, Some(dummy)) => dummy.view(),
            (None, None) => {
                return Err(Error::InvalidArgument {
                    op: OP,
                    detail: "a mask without its data".into(),
                });
            }
        };
        Ok(MaskLaunch {
            kind: self.kind,
            data,
            // `General` reads the kind in the integer's low bits; a custom mask its own integer.
            int: match self.kind {
                MaskKind::Custom => self.int,
                kind => General::int(kind.shipped(), self.int),
            },
            float: self.float,
            custom: self.custom(),
        })
    }
}

/// The handle's dummy mask buffer (uploaded once per stream handle on CUDA).
fn no_data(gpu: &Gpu) -> Result<Arc<DeviceVec<i32>>> {
    let Backend::Cuda(device) = &gpu.backend else {
        return Ok(Arc::new(gpu.upload(&[0i32])?));
    };
    let slot = device.cache::<NoData>();
    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(data) = &guard.0 {
        return Ok(data.clone());
    }
    let data = Arc::new(gpu.upload(&[0i32])?);
    guard.0 = Some(data.clone());
    Ok(data)
}
