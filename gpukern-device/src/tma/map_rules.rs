//! The rules `cuTensorMapEncodeTiled` holds a tiled tensor map to, checked on the host before the
//! driver is asked (whose refusal is a bare `CUDA_ERROR_INVALID_VALUE`) and by the simulator for
//! the tensors its copies are given (the driver would have refused to encode their maps). From
//! the driver API's documentation of the call; interleaved layouts and the packed sub-byte types
//! are not modelled (gpukern encodes neither).

use core::fmt;

/// Bytes a tensor map itself must be aligned to in memory.
pub const MAP_ALIGN: u64 = 64;

/// A tensor map's shared-memory swizzle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// No swizzle.
    None,
    /// 32-byte swizzle.
    B32,
    /// 64-byte swizzle.
    B64,
    /// 128-byte swizzle ([`super::SWIZZLE_128B`]).
    B128,
}

impl Swizzle {
    /// The swizzle span in bytes: the most bytes a box's inner dimension may have (`None`:
    /// unbounded).
    pub fn span(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }
}

/// What `cuTensorMapEncodeTiled` is asked to encode (non-interleaved): dimension 0 is the
/// contiguous one (a row-major matrix's columns), and `strides[i]` is the byte stride of dimension
/// `i + 1`.
#[derive(Clone, Copy, Debug)]
pub struct TiledMap<'a> {
    /// The device address of the tensor's first element.
    pub address: u64,
    /// Bytes per element (1, 2, 4 or 8).
    pub element_bytes: u32,
    /// Elements along each dimension (1 to 5 of them).
    pub dims: &'a [u64],
    /// Byte strides of dimensions 1.. (`dims.len() - 1` of them).
    pub strides: &'a [u64],
    /// The box: elements copied along each dimension.
    pub box_dims: &'a [u32],
    /// The step along each dimension inside the box (1 for a dense box).
    pub element_strides: &'a [u32],
    /// The swizzle of the box in shared memory.
    pub swizzle: Swizzle,
}

/// A rule of the encoding a [`TiledMap`] breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapError {
    /// The rule, as the driver's documentation states it.
    pub rule: &'static str,
    /// The values that break it.
    pub detail: String,
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.rule, self.detail)
    }
}

impl std::error::Error for MapError {}

fn broken(rule: &'static str, detail: String) -> Result<(), MapError> {
    Err(MapError { rule, detail })
}

impl TiledMap<'_> {
    /// Checks every rule; the first one broken.
    pub fn check(&self) -> Result<(), MapError> {
        let rank = self.dims.len();
        if !(1..=5).contains(&rank) {
            return broken("the tensor rank is 1 to 5", format!("rank {rank}"));
        }
        if self.strides.len() != rank - 1 || self.box_dims.len() != rank || self.element_strides.len() != rank
        {
            return broken(
                "one stride per dimension but the first, one box size and one element stride per dimension",
                format!(
                    "{} dims, {} strides, {} box sizes, {} element strides",
                    rank,
                    self.strides.len(),
                    self.box_dims.len(),
                    self.element_strides.len()
                ),
            );
        }
        let size = u64::from(self.element_bytes);
        if ![1, 2, 4, 8].contains(&size) {
            return broken("elements of 1, 2, 4 or 8 bytes", format!("{size} bytes"));
        }
        if !self.address.is_multiple_of(16) {
            return broken(
                "the global address is 16-byte aligned",
                format!("address {:#x}", self.address),
            );
        }
        for (i, &d) in self.dims.iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return broken(
                    "every global dimension is 1 to 2^32",
                    format!("dimension {i} is {d}"),
                );
            }
        }
        for (i, &s) in self.strides.iter().enumerate() {
            if s % 16 != 0 || s >= 1 << 40 {
                return broken(
                    "every global stride is a multiple of 16 bytes and below 2^40",
                    format!("the stride of dimension {} is {s} bytes", i + 1),
                );
            }
            let below = match i {
                0 => self.dims[0] * size,
                _ => self.dims[i] * self.strides[i - 1],
            };
            if s < below {
                return broken(
                    "each stride spans the dimension below it (padding is never negative)",
                    format!(
                        "the stride of dimension {} is {s} bytes, dimension {i} spans {below}",
                        i + 1
                    ),
                );
            }
        }
        for (i, &b) in self.box_dims.iter().enumerate() {
            if b == 0 || b > 256 {
                return broken(
                    "every box dimension is 1 to 256",
                    format!("box dimension {i} is {b}"),
                );
            }
        }
        let inner = u64::from(self.box_dims[0]) * size;
        if inner % 16 != 0 {
            return broken(
                "the box's inner dimension is a multiple of 16 bytes",
                format!("{} elements of {size} bytes: {inner} bytes", self.box_dims[0]),
            );
        }
        if let Some(span) = self.swizzle.span().filter(|&span| inner > span) {
            return broken(
                "the box's inner dimension is at most the swizzle span",
                format!("{inner} bytes with a {span}-byte swizzle"),
            );
        }
        for (i, &e) in self.element_strides.iter().enumerate() {
            if e == 0 || e > 8 {
                return broken(
                    "every element stride is 1 to 8",
                    format!("element stride {i} is {e}"),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Swizzle, TiledMap};

    fn matrix(address: u64, rows: u64, cols: u64, stride_bytes: u64, box_cols: u32) -> Result<(), String> {
        TiledMap {
            address,
            element_bytes: 2,
            dims: &[cols, rows],
            strides: &[stride_bytes],
            box_dims: &[box_cols, 64],
            element_strides: &[1, 1],
            swizzle: Swizzle::B128,
        }
        .check()
        .map_err(|e| e.rule.to_string())
    }

    #[test]
    fn the_encoding_rules_accept_what_the_kernels_encode_and_refuse_the_rest() {
        assert_eq!(matrix(0x1000, 130, 328, 656, 64), Ok(()));
        let rule = |r: Result<(), String>| r.unwrap_err();
        assert!(rule(matrix(0x1008, 130, 328, 656, 64)).contains("16-byte aligned"));
        assert!(rule(matrix(0x1000, 130, 12, 24, 64)).contains("multiple of 16"));
        assert!(rule(matrix(0x1000, 130, 328, 640, 64)).contains("spans the dimension"));
        assert!(rule(matrix(0x1000, 130, 328, 656, 128)).contains("swizzle span"));
        assert!(rule(matrix(0x1000, 0, 328, 656, 64)).contains("1 to 2^32"));
        assert!(rule(matrix(0x1000, 130, 328, 656, 4)).contains("inner dimension is a multiple"));
    }
}
