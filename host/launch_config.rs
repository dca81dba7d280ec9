//! Grid and block computation, in one place, checked against the device's limits.
//!
//! A launch that the device cannot run is an [`Error::TooLarge`], never a silently smaller grid.

use gpukern_device::sim::Dim3;

use crate::error::{Error, Result};

/// Grid, block and dynamic shared memory of one kernel launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in the grid, `(x, y, z)`.
    pub grid: (u32, u32, u32),
    /// Threads per block, `(x, y, z)`.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

/// What one launch may use on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Threads in one block.
    pub max_threads_per_block: u32,
    /// Block extent per dimension.
    pub max_block_dim: [u32; 3],
    /// Grid extent per dimension.
    pub max_grid_dim: [u32; 3],
    /// Dynamic shared memory a block may use without opting in to more.
    pub max_shared_mem_per_block: u32,
    /// Dynamic shared memory a block may use once its kernel opts in
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`; gpukern opts in the kernels that need
    /// it when it loads them).
    pub max_shared_mem_per_block_optin: u32,
}

impl DeviceLimits {
    /// These limits with the opt-in shared memory as the per-block limit: what a kernel opted in
    /// to all of it may use.
    pub fn opted_in(self) -> DeviceLimits {
        DeviceLimits {
            max_shared_mem_per_block: self.max_shared_mem_per_block_optin,
            ..self
        }
    }

    /// The limits of every NVIDIA GPU since compute capability 3.0; the simulator uses these.
    pub const COMMON: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dim: [1024, 1024, 64],
        max_grid_dim: [i32::MAX as u32, 65535, 65535],
        max_shared_mem_per_block: 48 * 1024,
        max_shared_mem_per_block_optin: 48 * 1024,
    };

    /// The simulator's limits: [`DeviceLimits::COMMON`], with the opt-in shared memory of an
    /// H100/H200 (227 KiB), so that it runs the launches such a GPU runs.
    pub const SIMULATOR: DeviceLimits = DeviceLimits {
        max_shared_mem_per_block_optin: 227 * 1024,
        ..DeviceLimits::COMMON
    };
}

/// `ceil(n / d)` for `d > 0`.
pub fn ceil_div(n: usize, d: usize) -> usize {
    n.div_ceil(d)
}

impl LaunchConfig {
    /// One thread per element of `n`, in blocks of `block` threads (1-D).
    pub fn linear(op: &'static str, n: usize, block: u32, limits: &DeviceLimits) -> Result<Self> {
        let grid = grid_extent(op, "elements", n, block as usize, limits.max_grid_dim[0])?;
        LaunchConfig {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes: 0,
        }
        .checked(op, limits)
    }

    /// One thread per element of a `rows x cols` output, in `tile x tile` blocks: x walks columns,
    /// y walks rows.
    pub fn tiles_2d(
        op: &'static str,
        rows: usize,
        cols: usize,
        tile: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let gx = grid_extent(op, "columns", cols, tile as usize, limits.max_grid_dim[0])?;
        let gy = grid_extent(op, "rows", rows, tile as usize, limits.max_grid_dim[1])?;
        LaunchConfig {
            grid: (gx, gy, 1),
            block: (tile, tile, 1),
            shared_mem_bytes,
        }
        .checked(op, limits)
    }

    /// A 2-D launch over `items = (x, y)` (x fastest: the columns of a row-major matrix, y its
    /// rows) in blocks of `block = (bx, by)` threads, each block taking a `tile = (tx, ty)` of
    /// items: `ceil(x / tx) x ceil(y / ty)` blocks. `tile == block` is one thread per item; a
    /// tile a multiple of the block gives each thread several. Any shapes, square or not.
    ///
    /// ```
    /// use gpukern::{DeviceLimits, LaunchConfig};
    /// // A 1000 x 600 (cols x rows) output, 64 x 16 tiles, blocks of 32 x 8 threads.
    /// let c = LaunchConfig::grid_2d("op", (1000, 600), (64, 16), (32, 8), 0, &DeviceLimits::COMMON)?;
    /// assert_eq!((c.grid, c.block), ((16, 38, 1), (32, 8, 1)));
    /// # Ok::<(), gpukern::Error>(())
    /// ```
    ///
    /// Errors: [`Error::InvalidArgument`] for an empty tile or block; [`Error::TooLarge`] when
    /// the grid or the block exceeds `limits`.
    pub fn grid_2d(
        op: &'static str,
        items: (usize, usize),
        tile: (usize, usize),
        block: (u32, u32),
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        Self::grid_3d(
            op,
            (items.0, items.1, 1),
            (tile.0, tile.1, 1),
            (block.0, block.1, 1),
            shared_mem_bytes,
            limits,
        )
    }

    /// [`LaunchConfig::grid_2d`] in three dimensions: `ceil(x / tx) x ceil(y / ty) x ceil(z /
    /// tz)` blocks of `block` threads over `items = (x, y, z)`.
    ///
    /// Errors: as [`LaunchConfig::grid_2d`].
    pub fn grid_3d(
        op: &'static str,
        items: (usize, usize, usize),
        tile: (usize, usize, usize),
        block: (u32, u32, u32),
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let [gx, gy, gz] = [
            ("x", items.0, tile.0, limits.max_grid_dim[0]),
            ("y", items.1, tile.1, limits.max_grid_dim[1]),
            ("z", items.2, tile.2, limits.max_grid_dim[2]),
        ]
        .map(|(axis, n, t, max)| {
            if t == 0 {
                return Err(Error::InvalidArgument {
                    op,
                    detail: format!("a tile of 0 items along {axis}"),
                });
            }
            let what = format!("items along {axis} in tiles of {t}");
            grid_extent(op, &what, n.max(1), t, max)
        });
        LaunchConfig {
            grid: (gx?, gy?, gz?),
            block,
            shared_mem_bytes,
        }
        .checked(op, limits)
    }

    /// One block of `block` threads per row.
    pub fn per_row(
        op: &'static str,
        rows: usize,
        block: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let grid = grid_extent(op, "rows", rows, 1, limits.max_grid_dim[0])?;
        LaunchConfig {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_mem_bytes,
        }
        .checked(op, limits)
    }

    /// One thread per `vectors_per_thread` 4-float vectors of `n` elements, in blocks of
    /// `block` threads (1-D); at least one thread, which also takes a tail of fewer than 4.
    pub fn vectors(
        op: &'static str,
        n: usize,
        vectors_per_thread: usize,
        block: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let threads = (n / 4).div_ceil(vectors_per_thread.max(1)).max(1);
        Self::linear(op, threads, block, limits)
    }

    /// Blocks of `block` threads that take `rows_per_block` rows each (a warp or a group of
    /// lanes per row).
    pub fn rows_per_block(
        op: &'static str,
        rows: usize,
        rows_per_block: usize,
        block: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let blocks = rows.div_ceil(rows_per_block.max(1));
        Self::per_row(op, blocks, block, shared_mem_bytes, limits)
    }

    /// A persistent launch over `rows` rows, `rows_per_block` at a time: as many blocks as are
    /// `resident` on the device at once, no more than there is work for.
    pub fn persistent(
        op: &'static str,
        (rows, rows_per_block): (usize, usize),
        resident: u32,
        block: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let blocks = rows.div_ceil(rows_per_block.max(1)).min(resident as usize);
        Self::per_row(op, blocks, block, shared_mem_bytes, limits)
    }

    /// One block of `block` threads per chunk of a row, `chunks` chunks per row: block
    /// `row * chunks + chunk`.
    pub fn row_chunks(
        op: &'static str,
        rows: usize,
        chunks: usize,
        block: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let blocks = rows.checked_mul(chunks).ok_or_else(|| Error::TooLarge {
            op,
            detail: format!("{rows} rows x {chunks} chunks overflow usize"),
        })?;
        Self::per_row(op, blocks, block, shared_mem_bytes, limits)
    }

    /// One 1-D block of `threads` threads per `block_rows x block_cols` tile of a `rows x cols`
    /// output, x walking the column tiles (`repeat_x` times over, e.g. once per slice of a split
    /// `k`), y walking the row tiles.
    pub fn block_tiles(
        op: &'static str,
        (rows, cols): (usize, usize),
        (block_rows, block_cols): (usize, usize),
        repeat_x: usize,
        threads: u32,
        shared_mem_bytes: u32,
        limits: &DeviceLimits,
    ) -> Result<Self> {
        let tiles_x = ceil_div(cols, block_cols.max(1)).saturating_mul(repeat_x);
        let gx = grid_extent(op, "column tiles", tiles_x, 1, limits.max_grid_dim[0])?;
        let gy = grid_extent(op, "row tiles", rows, block_rows, limits.max_grid_dim[1])?;
        LaunchConfig {
            grid: (gx, gy, 1),
            block: (threads, 1, 1),
            shared_mem_bytes,
        }
        .checked(op, limits)
    }

    /// Total threads of the launch.
    pub fn threads(&self) -> u64 {
        let (gx, gy, gz) = self.grid;
        let (bx, by, bz) = self.block;
        [gx, gy, gz, bx, by, bz].iter().map(|&d| d as u64).product()
    }

    /// Errors unless every extent is non-zero and within `limits`.
    pub fn checked(self, op: &'static str, limits: &DeviceLimits) -> Result<Self> {
        let (bx, by, bz) = self.block;
        let (gx, gy, gz) = self.grid;
        let too_large = |detail: String| Err(Error::TooLarge { op, detail });
        if [bx, by, bz, gx, gy, gz].contains(&0) {
            return Err(Error::InvalidArgument {
                op,
                detail: format!("empty launch {self:?}"),
            });
        }
        let threads = bx as u64 * by as u64 * bz as u64;
        if threads > limits.max_threads_per_block as u64 {
            return too_large(format!(
                "{threads} threads per block, the device allows {}",
                limits.max_threads_per_block
            ));
        }
        for (axis, (&b, &max)) in ["x", "y", "z"]
            .iter()
            .zip([bx, by, bz].iter().zip(&limits.max_block_dim))
        {
            if b > max {
                return too_large(format!("block {axis} extent {b}, the device allows {max}"));
            }
        }
        for (axis, (&g, &max)) in ["x", "y", "z"]
            .iter()
            .zip([gx, gy, gz].iter().zip(&limits.max_grid_dim))
        {
            if g > max {
                return too_large(format!("grid {axis} extent {g}, the device allows {max}"));
            }
        }
        if self.shared_mem_bytes > limits.max_shared_mem_per_block {
            return too_large(format!(
                "{} bytes of shared memory per block, the device allows {}",
                self.shared_mem_bytes, limits.max_shared_mem_per_block
            ));
        }
        Ok(self)
    }

    /// The same launch for the simulator.
    pub fn to_sim(self) -> gpukern_device::sim::LaunchConfig {
        let d = |(x, y, z): (u32, u32, u32)| Dim3::new(x, y, z);
        gpukern_device::sim::LaunchConfig {
            grid: d(self.grid),
            block: d(self.block),
            shared_mem_bytes: self.shared_mem_bytes,
        }
    }

    /// The same launch for cudarc.
    pub fn to_cuda(self) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: self.grid,
            block_dim: self.block,
            shared_mem_bytes: self.shared_mem_bytes,
        }
    }
}

/// Blocks needed to cover `n` items `per_block` at a time, if that fits `max`.
fn grid_extent(op: &'static str, what: &str, n: usize, per_block: usize, max: u32) -> Result<u32> {
    if per_block == 0 {
        return Err(Error::InvalidArgument {
            op,
            detail: format!("blocks of 0 threads for {n} {what}"),
        });
    }
    let blocks = ceil_div(n, per_block);
    if blocks > max as usize {
        return Err(Error::TooLarge {
            op,
            detail: format!("{n} {what} need {blocks} blocks of {per_block}, the device's grid allows {max}"),
        });
    }
    Ok(blocks as u32)
}
