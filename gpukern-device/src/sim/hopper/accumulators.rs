//! `wgmma` accumulators in flight. On the GPU a product's accumulator registers are the tensor
//! core's until the `wait_group` that retires it; reading or writing them before is undefined.
//! The simulator hands the kernel, in their place, quiet NaNs whose payload names the product
//! chain ("set") and the slot, and keeps the true values aside until the retiring wait. So an
//! in-flight accumulator that is stored to memory, or changed before it goes back to a product or
//! a wait, is recognised and reported.

/// The bits every in-flight marker has: a quiet NaN (exponent all ones, bit 22 set) with the
/// signature `0x55` in payload bits 15..22.
const SIGNATURE: u32 = 0x7fc0_0000 | (0x55 << 15);
/// The bits that identify a marker (the rest: set in bits 7..15, slot in bits 0..7).
const MASK: u32 = 0xffff_8000;
/// Most sets one thread has in flight at once.
pub(crate) const MAX_SETS: u32 = 256;
/// Most accumulators of one set (slots 0..128).
pub(crate) const MAX_SLOTS: usize = 128;

/// The marker of slot `slot` of set `set`.
pub(crate) fn marker(set: u32, slot: usize) -> f32 {
    f32::from_bits(SIGNATURE | ((set % MAX_SETS) << 7) | (slot as u32 % MAX_SLOTS as u32))
}

/// The set and slot a marker's bits name, if they are a marker.
pub(crate) fn decode(bits: u32) -> Option<(u32, usize)> {
    (bits & MASK == SIGNATURE).then_some(((bits >> 7) & 0xff, (bits & 0x7f) as usize))
}

/// What a thread's accumulator array is, given to a product or a wait.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Ordinary values (never in flight, or retired and handed back).
    Values,
    /// Every slot the untouched marker of set `set`.
    InFlight(u32),
    /// A mixture: slot `slot` is not what it should be.
    Touched { set: u32, slot: usize },
}

/// Classifies an accumulator array.
pub(crate) fn held(acc: &[f32]) -> Held {
    let Some((set, _)) = acc.iter().find_map(|a| decode(a.to_bits())) else {
        return Held::Values;
    };
    match acc
        .iter()
        .enumerate()
        .find(|&(i, a)| a.to_bits() != marker(set, i).to_bits())
    {
        None => Held::InFlight(set),
        Some((slot, _)) => Held::Touched { set, slot },
    }
}

#[cfg(test)]
mod tests {
    use super::{decode, held, marker, Held};

    #[test]
    fn markers_survive_arithmetic_and_are_told_from_values() {
        let m = marker(3, 17);
        assert!(m.is_nan());
        assert_eq!(decode(m.to_bits()), Some((3, 17)));
        let scaled = std::hint::black_box(m) * std::hint::black_box(2.0f32) + 1.0;
        assert_eq!(decode(scaled.to_bits()), Some((3, 17)));
        assert_eq!(decode(f32::NAN.to_bits()), None);
        assert_eq!(decode(1.5f32.to_bits()), None);
        let mut acc: Vec<f32> = (0..64).map(|i| marker(5, i)).collect();
        assert_eq!(held(&acc), Held::InFlight(5));
        acc[9] = 0.0;
        assert_eq!(held(&acc), Held::Touched { set: 5, slot: 9 });
        assert_eq!(held(&[1.0, 2.0]), Held::Values);
    }
}
