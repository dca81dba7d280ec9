//! Embedding gather: token ids to rows of a `vocab x hidden` bf16 table. The ids are checked on
//! the host when uploaded ([`TokenIds`]); the plan ([`EmbeddingPlan`]) is chosen once per call.
//! Kernels and their guard: `kernels_gpu::embedding`.

mod kernels;
mod plan;
pub use plan::{EmbeddingAlgorithm, EmbeddingPlan};

use half::bf16;
use kernels::EmbeddingKernels;
use kernels_gpu::embedding::{EMBEDDING_BLOCK, EMBEDDING_SCALAR_BLOCK, EMBEDDING_UNROLL};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec, Element};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "embedding";

/// A token id's integer type: `i32` or `i64`.
pub trait TokenIdElement: Element + kernels_gpu::embedding::TokenId + sealed::Sealed {
    /// The id as i64, for the host's check.
    #[doc(hidden)]
    fn as_i64(self) -> i64;
    /// The kernels of this id type.
    #[doc(hidden)]
    fn kernels() -> &'static EmbeddingKernels<Self>;
}

mod sealed {
    /// Only the id types with embedding kernels.
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

impl TokenIdElement for i32 {
    fn as_i64(self) -> i64 {
        i64::from(self)
    }
    fn kernels() -> &'static EmbeddingKernels<i32> {
        &kernels::I32
    }
}

impl TokenIdElement for i64 {
    fn as_i64(self) -> i64 {
        self
    }
    fn kernels() -> &'static EmbeddingKernels<i64> {
        &kernels::I64
    }
}

/// Token ids on the device, each checked on the host to lie in `0..vocab` when uploaded
/// ([`Gpu::upload_token_ids`], [`TokenIds::update`]).
pub struct TokenIds<I: TokenIdElement> {
    ids: DeviceVec<I>,
    vocab: usize,
}

/// A graph ([`crate::Gpu::capture_with`]) may hold them, so that a decode loop updates them
/// between replays.
impl<I: TokenIdElement> crate::graph::GraphBuffers for TokenIds<I> {
    fn addresses(&self, out: &mut Vec<(usize, usize)>) {
        self.ids.addresses(out);
    }
}

impl<I: TokenIdElement> TokenIds<I> {
    /// Number of ids (tokens).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The vocabulary size the ids were checked against.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Overwrites the ids (no allocation: a decode loop's next tokens), checked as
    /// [`Gpu::upload_token_ids`] checks them.
    ///
    /// Errors: [`Error::InvalidArgument`] for an id out of range (nothing is written);
    /// [`Error::ShapeMismatch`] unless there are as many as before.
    pub fn update(&mut self, ids: &[I]) -> Result<()> {
        check_ids(ids, self.vocab)?;
        same_shape(OP, &[self.len()], &[ids.len()], "as many ids as before")?;
        self.ids.copy_from_host(ids)
    }
}

/// The first id outside `0..vocab`, as an error.
fn check_ids<I: TokenIdElement>(ids: &[I], vocab: usize) -> Result<()> {
    match ids
        .iter()
        .enumerate()
        .find(|&(_, &id)| id.as_i64() < 0 || id.as_i64() as u64 >= vocab as u64)
    {
        Some((t, &id)) => Err(Error::InvalidArgument {
            op: OP,
            detail: format!("token id {} at {t} is outside 0..{vocab}", id.as_i64()),
        }),
        None => Ok(()),
    }
}

impl Gpu {
    /// Uploads token ids (i32 or i64), each checked to lie in `0..vocab` (the table's rows).
    ///
    /// Errors: [`Error::InvalidArgument`] naming the first id out of range.
    pub fn upload_token_ids<I: TokenIdElement>(&self, ids: &[I], vocab: usize) -> Result<TokenIds<I>> {
        check_ids(ids, vocab)?;
        Ok(TokenIds {
            ids: self.upload(ids)?,
            vocab,
        })
    }

    /// The rows of `table` (`vocab x hidden`) the ids name, a new `tokens x hidden` matrix:
    /// PyTorch's `F.embedding(ids, table)`.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless the ids were checked against `table.rows()`.
    pub fn embedding<I: TokenIdElement>(
        &self,
        table: &DeviceMatrix<bf16>,
        ids: &TokenIds<I>,
    ) -> Result<DeviceMatrix<bf16>> {
        let mut y = self.zeros_matrix_of::<bf16>(ids.len(), table.cols)?;
        self.embedding_into_with(table, ids, &mut y, EmbeddingAlgorithm::default())?;
        Ok(y)
    }

    /// [`Gpu::embedding`] into an existing `tokens x hidden` matrix (no allocation), with the
    /// given algorithm.
    pub fn embedding_into_with<I: TokenIdElement>(
        &self,
        table: &DeviceMatrix<bf16>,
        ids: &TokenIds<I>,
        y: &mut DeviceMatrix<bf16>,
        algorithm: EmbeddingAlgorithm,
    ) -> Result<()> {
        same_shape(
            OP,
            &[table.rows],
            &[ids.vocab],
            "the ids must be checked against the table's rows",
        )?;
        self.embedding_unchecked_with(table, &ids.ids, y, algorithm)
    }

    /// [`Gpu::embedding_into_with`] with the default algorithm.
    pub fn embedding_into<I: TokenIdElement>(
        &self,
        table: &DeviceMatrix<bf16>,
        ids: &TokenIds<I>,
        y: &mut DeviceMatrix<bf16>,
    ) -> Result<()> {
        self.embedding_into_with(table, ids, y, EmbeddingAlgorithm::default())
    }

    /// The gather on ids no host check saw: for tests that show the kernels' own guard (an id
    /// outside the table reads nothing and gives a row of zeros).
    #[doc(hidden)]
    pub fn embedding_unchecked_with<I: TokenIdElement>(
        &self,
        table: &DeviceMatrix<bf16>,
        ids: &DeviceVec<I>,
        y: &mut DeviceMatrix<bf16>,
        algorithm: EmbeddingAlgorithm,
    ) -> Result<()> {
        let (tokens, vocab, hidden) = (ids.len(), table.rows, table.cols);
        same_shape(
            OP,
            &[tokens, hidden],
            &[y.rows, y.cols],
            "the output is tokens x hidden",
        )?;
        if !(self.owns(&table.data) && self.owns(ids) && self.owns(&y.data)) {
            return Err(Error::WrongDevice { op: OP });
        }
        if tokens == 0 || hidden == 0 {
            return Ok(());
        }
        let aligned = table.data.is_16_byte_aligned() && y.data.is_16_byte_aligned();
        let plan = EmbeddingPlan::choose(algorithm, tokens, hidden, aligned);
        let limits = self.limits();
        let outputs = crate::buffer::checked_len(OP, &[tokens, hidden])?;
        let cfg = match plan {
            EmbeddingPlan::Scalar => LaunchConfig::linear(OP, outputs, EMBEDDING_SCALAR_BLOCK, &limits)?,
            EmbeddingPlan::Rows => LaunchConfig::linear(
                OP,
                (outputs / 8).div_ceil(EMBEDDING_UNROLL),
                EMBEDDING_BLOCK,
                &limits,
            )?,
        };
        // SAFETY: `table` holds vocab * hidden, `ids` tokens, `y` tokens * hidden (checked
        // above); the kernels read the table only at ids in 0..vocab; the vector plan only for
        // aligned buffers and `hidden` a multiple of 8; `cfg` is the kernel's 1-D shape.
        unsafe {
            kernels::launch(
                &self.library(),
                I::kernels().of(plan),
                cfg,
                (&table.data, ids, &mut y.data),
                (tokens, vocab, hidden),
            )
        }
    }
}
