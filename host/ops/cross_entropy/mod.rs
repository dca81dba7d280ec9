//! Cross-entropy loss over the rows of a matrix of logits with one class label per row: the
//! labels checked once on the host ([`ClassLabels`]), the plan (chunks per row) chosen once,
//! then two launches (three for the mean). Kernels and edge rules: `kernels_gpu::cross_entropy`.
//! `mod.rs` checks the operands and holds the public methods, `plan.rs` picks the kernels and
//! the chunks (`CrossEntropyPlan`), `kernels.rs` launches them.

mod kernels;
mod plan;
pub use plan::CrossEntropyAlgorithm;

use plan::CrossEntropyPlan;
pub use plan::cross_entropy_chunks;

use kernels_gpu::cross_entropy::{
    FINISH_BLOCK, FINISH_ROWS, MEAN_BLOCK, MEAN_SHARED_BYTES, WARP_CHUNK_BLOCK, WARP_CHUNK_WARPS,
};
use kernels_gpu::softmax::{STATS_SHARED_BYTES, STREAM_BLOCK};

use super::same_shape;
use crate::buffer::{DeviceMatrix, DeviceVec};
use crate::device::Gpu;
use crate::error::{Error, Result};
use crate::launch_config::LaunchConfig;

/// The operation's name in errors.
const OP: &str = "cross_entropy";

/// Class labels on the device, one per row, each checked on the host to lie in `0..classes`
/// when uploaded ([`Gpu::upload_labels`]): the loss then never meets a label out of range.
pub struct ClassLabels {
    labels: DeviceVec<i64>,
    classes: usize,
}

impl ClassLabels {
    /// Number of labels (rows).
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no labels.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The number of classes the labels were checked against.
    pub fn classes(&self) -> usize {
        self.classes
    }
}

impl Gpu {
    /// Uploads one class label per row, checked on the host to lie in `0..classes` (the logits'
    /// columns).
    ///
    /// Errors: [`Error::InvalidArgument`] naming the first label out of range (negative, or
    /// `>= classes`; PyTorch's `ignore_index` is not supported).
    pub fn upload_labels(&self, labels: &[i64], classes: usize) -> Result<ClassLabels> {
        if let Some((row, &label)) = labels
            .iter()
            .enumerate()
            .find(|&(_, &l)| l < 0 || l as u64 >= classes as u64)
        {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("label {label} of row {row} is outside 0..{classes}"),
            });
        }
        Ok(ClassLabels {
            labels: self.upload(labels)?,
            classes,
        })
    }

    /// The cross-entropy loss of each row of `logits`:
    /// `loss[r] = logsumexp(logits[r]) - logits[r][labels[r]]`, computed in one read of the
    /// logits (see `kernels_gpu::cross_entropy`): PyTorch's `cross_entropy(reduction='none')`.
    ///
    /// A NaN in a row makes its loss NaN; infinite logits give infinite or NaN losses as in
    /// PyTorch; other rows are never affected. No rows: an empty result.
    ///
    /// Errors: [`Error::ShapeMismatch`] unless there is one label per row and the labels were
    /// checked against `logits.cols()` classes; [`Error::InvalidArgument`] for rows of no
    /// columns (no class to pick).
    pub fn cross_entropy(&self, logits: &DeviceMatrix, labels: &ClassLabels) -> Result<DeviceVec> {
        let mut loss = self.alloc(logits.rows)?;
        self.cross_entropy_into(logits, labels, &mut loss)?;
        Ok(loss)
    }

    /// [`Gpu::cross_entropy`] into an existing vector of one loss per row.
    pub fn cross_entropy_into(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        loss: &mut DeviceVec,
    ) -> Result<()> {
        self.cross_entropy_into_with(logits, labels, loss, CrossEntropyAlgorithm::default())
    }

    /// [`Gpu::cross_entropy`] with the given algorithm.
    pub fn cross_entropy_with(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        algorithm: CrossEntropyAlgorithm,
    ) -> Result<DeviceVec> {
        let mut loss = self.alloc(logits.rows)?;
        self.cross_entropy_into_with(logits, labels, &mut loss, algorithm)?;
        Ok(loss)
    }

    /// [`Gpu::cross_entropy_into`] with the given algorithm.
    pub fn cross_entropy_into_with(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        loss: &mut DeviceVec,
        algorithm: CrossEntropyAlgorithm,
    ) -> Result<()> {
        let (rows, cols) = (logits.rows, logits.cols);
        same_shape(OP, &[rows], &[labels.len()], "one label per row")?;
        same_shape(
            OP,
            &[cols],
            &[labels.classes],
            "the labels must be checked against the logits' columns",
        )?;
        same_shape(OP, &[rows], &[loss.len()], "one loss per row")?;
        if !(self.owns(&logits.data) && self.owns(&labels.labels) && self.owns(loss)) {
            return Err(Error::WrongDevice { op: OP });
        }
        if rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: format!("{rows} rows of 0 columns: no class to pick"),
            });
        }
        // Only the block plan sizes its chunks by the device.
        let sms = match algorithm {
            CrossEntropyAlgorithm::Blocks => self.multiprocessors()?,
            _ => 0,
        };
        match CrossEntropyPlan::choose(algorithm, rows, cols, sms) {
            CrossEntropyPlan::Warps { chunks, chunk_vecs } => {
                self.cross_entropy_warps(logits, labels, loss, (chunks, chunk_vecs))
            }
            CrossEntropyPlan::Blocks { chunks, chunk_vecs } => {
                self.cross_entropy_blocks(logits, labels, loss, (chunks, chunk_vecs))
            }
        }
    }

    /// The warp plan of a checked call: a warp per chunk of a row, then the finishing kernel
    /// where a row has several chunks.
    fn cross_entropy_warps(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        loss: &mut DeviceVec,
        (chunks, chunk_vecs): (usize, usize),
    ) -> Result<()> {
        let (rows, cols) = (logits.rows, logits.cols);
        let limits = self.limits();
        let warps = rows.checked_mul(chunks).ok_or_else(|| Error::TooLarge {
            op: OP,
            detail: format!("{rows} rows x {chunks} chunks overflow usize"),
        })?;
        let stats =
            LaunchConfig::rows_per_block(OP, warps, WARP_CHUNK_WARPS as usize, WARP_CHUNK_BLOCK, 0, &limits)?;
        let finish = LaunchConfig::rows_per_block(OP, rows, FINISH_ROWS as usize, FINISH_BLOCK, 0, &limits)?;
        // One chunk per row: the warp writes the loss, no partials.
        let mut partials = self.alloc(if chunks > 1 { 2 * warps } else { 0 })?;
        // SAFETY: `logits` holds rows*cols >= 1 floats, `labels` and `loss` rows (checked
        // above), `partials` 2 per warp when there are several chunks; the configurations
        // cover rows*chunks warps and the finishing kernel's rows, with
        // chunks*chunk_vecs >= cols/4.
        unsafe {
            kernels::cross_entropy_warps(
                self,
                (stats, finish),
                &logits.data,
                &labels.labels,
                &mut partials,
                loss,
                (rows, cols),
                (chunks, chunk_vecs),
            )
        }
    }

    /// The block plan of a checked call: a block of 512 threads per chunk of a row, then the
    /// finishing kernel.
    fn cross_entropy_blocks(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        loss: &mut DeviceVec,
        (chunks, chunk_vecs): (usize, usize),
    ) -> Result<()> {
        let (rows, cols) = (logits.rows, logits.cols);
        let limits = self.limits();
        let stats = LaunchConfig::row_chunks(OP, rows, chunks, STREAM_BLOCK, STATS_SHARED_BYTES, &limits)?;
        let finish = LaunchConfig::rows_per_block(OP, rows, FINISH_ROWS as usize, FINISH_BLOCK, 0, &limits)?;
        let mut partials = self.alloc(2 * stats.grid.0 as usize)?;
        // SAFETY: `logits` holds rows*cols floats, `labels` and `loss` rows (checked above),
        // `partials` 2 per block of the statistics step; the configurations are the kernels'
        // shapes with chunks*chunk_vecs >= cols/4.
        unsafe {
            kernels::cross_entropy(
                self,
                (stats, finish),
                &logits.data,
                &labels.labels,
                &mut partials,
                loss,
                (rows, cols),
                (chunks, chunk_vecs),
            )
        }
    }

    /// The mean over the rows of [`Gpu::cross_entropy`] (PyTorch's `reduction='mean'`), as a
    /// device vector of one element.
    ///
    /// Errors: those of [`Gpu::cross_entropy`]; [`Error::InvalidArgument`] for no rows (the
    /// mean of nothing).
    pub fn cross_entropy_mean(&self, logits: &DeviceMatrix, labels: &ClassLabels) -> Result<DeviceVec> {
        self.cross_entropy_mean_with(logits, labels, CrossEntropyAlgorithm::default())
    }

    /// [`Gpu::cross_entropy_mean`] with the given algorithm for the losses.
    pub fn cross_entropy_mean_with(
        &self,
        logits: &DeviceMatrix,
        labels: &ClassLabels,
        algorithm: CrossEntropyAlgorithm,
    ) -> Result<DeviceVec> {
        if logits.rows == 0 {
            return Err(Error::InvalidArgument {
                op: OP,
                detail: "no rows: the mean of no losses".into(),
            });
        }
        let loss = self.cross_entropy_with(logits, labels, algorithm)?;
        let mut out = self.alloc(1)?;
        let cfg = LaunchConfig::per_row(OP, 1, MEAN_BLOCK, MEAN_SHARED_BYTES, &self.limits())?;
        // SAFETY: `loss` holds rows >= 1 floats, `out` 1; one block of the kernel's shape.
        unsafe { kernels::mean(self, cfg, &loss, &mut out, logits.rows)? };
        Ok(out)
    }

    /// `cross_entropy_finish` launched alone on unchecked labels and given partial statistics:
    /// for tests that show the kernel's own guard (a label out of range reads nothing and gives
    /// NaN). `partials` holds `2 * rows * chunks` floats.
    #[doc(hidden)]
    pub fn cross_entropy_finish_unchecked(
        &self,
        logits: &DeviceMatrix,
        labels: &DeviceVec<i64>,
        partials: &DeviceVec,
        chunks: usize,
    ) -> Result<DeviceVec> {
        let (rows, cols) = (logits.rows, logits.cols);
        same_shape(OP, &[rows], &[labels.len()], "one label per row")?;
        same_shape(
            OP,
            &[2 * rows * chunks],
            &[partials.len()],
            "two floats per chunk",
        )?;
        let mut loss = self.alloc(rows)?;
        let cfg =
            LaunchConfig::rows_per_block(OP, rows, FINISH_ROWS as usize, FINISH_BLOCK, 0, &self.limits())?;
        // SAFETY: the sizes are checked above; `cfg` is the kernel's shape. The labels are not
        // checked: the kernel guards its gather.
        unsafe {
            kernels::finish(
                self,
                cfg,
                &logits.data,
                labels,
                partials,
                &mut loss,
                (rows, cols),
                chunks,
            )?;
        }
        Ok(loss)
    }
}
