//! Warp shuffles: each lane reads a register of another lane of its warp, any [`Shuffle`] value
//! (32-bit types in one `shfl.sync`, 64-bit ones in two, tuples and arrays field by field).

/// Which lane a shuffle reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Lane `lane_id() ^ mask` (`shfl.sync.bfly`, a butterfly): every lane reads one.
    Xor(u32),
    /// Lane `lane_id() + delta` (`shfl.sync.down`); lanes past 31 read their own value.
    Down(u32),
    /// Lane `lane_id() - delta` (`shfl.sync.up`); lanes below `delta` read their own value.
    Up(u32),
    /// Lane `index % 32` (`shfl.sync.idx`): a broadcast when every lane names the same one.
    Index(u32),
}

/// One shuffle of a 32-bit word: `shfl.sync.{bfly,down,up,idx}.b32` with the full member mask on
/// the GPU, a rendezvous of the warp's lanes (named by the caller's source location) in the
/// simulator.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shuffle_word(word: u32, source: Source) -> u32 {
    #[cfg(target_arch = "nvptx64")]
    {
        match source {
            Source::Xor(m) => shfl_b32::<0>(word, m),
            Source::Down(d) => shfl_b32::<1>(word, d),
            Source::Up(d) => shfl_b32::<2>(word, d),
            Source::Index(i) => shfl_b32::<3>(word, i),
        }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let lane = crate::sim::device::lane_id();
        let last = super::SIZE - 1;
        // A source past the warp makes the simulator return the lane's own value.
        let src = match source {
            Source::Xor(m) => lane ^ (m & last),
            Source::Down(d) => lane.saturating_add(d),
            Source::Up(d) => lane.checked_sub(d).unwrap_or(super::SIZE),
            Source::Index(i) => i & last,
        };
        crate::sim::device::warp_shuffle(word, src)
    }
}

/// `shfl.sync.<mode>.b32` with the full member mask: `MODE` 0 `bfly`, 1 `down`, 2 `up`, 3 `idx`
/// (`up` takes clamp 0, the others 31).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn shfl_b32<const MODE: u32>(word: u32, b: u32) -> u32 {
    let out: u32;
    // SAFETY: a register exchange among the warp's lanes; every lane reaches it (the callers'
    // contract, as for a barrier). Not `pure`: the compiler must neither drop nor move it.
    unsafe {
        match MODE {
            0 => {
                core::arch::asm!("shfl.sync.bfly.b32 {o}, {w}, {b}, 0x1f, 0xffffffff;", o = out(reg32) out, w = in(reg32) word, b = in(reg32) b, options(nomem, nostack))
            }
            1 => {
                core::arch::asm!("shfl.sync.down.b32 {o}, {w}, {b}, 0x1f, 0xffffffff;", o = out(reg32) out, w = in(reg32) word, b = in(reg32) b, options(nomem, nostack))
            }
            2 => {
                core::arch::asm!("shfl.sync.up.b32 {o}, {w}, {b}, 0x0, 0xffffffff;", o = out(reg32) out, w = in(reg32) word, b = in(reg32) b, options(nomem, nostack))
            }
            _ => {
                core::arch::asm!("shfl.sync.idx.b32 {o}, {w}, {b}, 0x1f, 0xffffffff;", o = out(reg32) out, w = in(reg32) word, b = in(reg32) b, options(nomem, nostack))
            }
        }
    }
    out
}

/// A value warp shuffles can move: its 32-bit words, each shuffled from the same source lane.
///
/// Implemented for the 32-bit scalars (one shuffle), the 64-bit ones (two), the 8- and 16-bit
/// ones (one, widened), tuples of up to four and arrays of them (field by field). A struct of
/// your own gets it by shuffling its fields:
///
/// ```ignore
/// impl Shuffle for ArgMax {
///     fn shuffle(self, from: Source) -> Self {
///         ArgMax { value: self.value.shuffle(from), index: self.index.shuffle(from) }
///     }
/// }
/// ```
/// (`#[track_caller]` on the method keeps the simulator's reports at your call site.)
pub trait Shuffle: Copy {
    /// This value as held by lane `from` (every lane of the warp calls it together).
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, from: Source) -> Self;
}

/// [`Shuffle`] for types of at most 32 bits, through `to` / `from` bits.
macro_rules! word {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl Shuffle for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            fn shuffle(self, from: Source) -> Self {
                let (to, back): (fn($t) -> u32, fn(u32) -> $t) = ($to, $from);
                back(shuffle_word(to(self), from))
            }
        }
    )*};
}

word! {
    u32: |v| v, |w| w;
    i32: |v| v as u32, |w| w as i32;
    f32: f32::to_bits, f32::from_bits;
    u16: u32::from, |w| w as u16;
    i16: |v| v as u32, |w| w as i16;
    u8: u32::from, |w| w as u8;
    i8: |v| v as u32, |w| w as i8;
    bool: u32::from, |w| w != 0;
    half::bf16: |v| u32::from(v.to_bits()), |w| half::bf16::from_bits(w as u16);
    half::f16: |v| u32::from(v.to_bits()), |w| half::f16::from_bits(w as u16);
}

/// [`Shuffle`] for 64-bit types: two shuffles, low word then high word.
macro_rules! double_word {
    ($($t:ty: $to:expr, $from:expr;)*) => {$(
        impl Shuffle for $t {
            #[inline(always)]
            #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
            fn shuffle(self, from: Source) -> Self {
                let (to, back): (fn($t) -> u64, fn(u64) -> $t) = ($to, $from);
                let bits = to(self);
                let lo = shuffle_word(bits as u32, from);
                let hi = shuffle_word((bits >> 32) as u32, from);
                back(u64::from(lo) | u64::from(hi) << 32)
            }
        }
    )*};
}

double_word! {
    u64: |v| v, |w| w;
    i64: |v| v as u64, |w| w as i64;
    f64: f64::to_bits, f64::from_bits;
    usize: |v| v as u64, |w| w as usize;
}

impl<A: Shuffle, B: Shuffle> Shuffle for (A, B) {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, from: Source) -> Self {
        (self.0.shuffle(from), self.1.shuffle(from))
    }
}

impl<A: Shuffle, B: Shuffle, C: Shuffle> Shuffle for (A, B, C) {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, from: Source) -> Self {
        (self.0.shuffle(from), self.1.shuffle(from), self.2.shuffle(from))
    }
}

impl<A: Shuffle, B: Shuffle, C: Shuffle, D: Shuffle> Shuffle for (A, B, C, D) {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, from: Source) -> Self {
        (
            self.0.shuffle(from),
            self.1.shuffle(from),
            self.2.shuffle(from),
            self.3.shuffle(from),
        )
    }
}

impl<T: Shuffle, const N: usize> Shuffle for [T; N] {
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    fn shuffle(self, from: Source) -> Self {
        let mut out = self;
        // A loop, not `map`: a closure would not carry the caller's location in the simulator.
        for (o, v) in out.iter_mut().zip(self) {
            *o = v.shuffle(from);
        }
        out
    }
}

/// The `value` of lane `lane_id() ^ lane_mask` (butterfly exchange; `lane_mask < 32`), for any
/// [`Shuffle`] type: one `shfl.sync.bfly.b32` per 32-bit word. Every lane of the warp calls it
/// together.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_xor<T: Shuffle>(value: T, lane_mask: u32) -> T {
    value.shuffle(Source::Xor(lane_mask))
}

/// [`shfl_xor`] on a `u32` (kept for the kernels written before it was generic).
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_xor_u32(value: u32, lane_mask: u32) -> u32 {
    shuffle_word(value, Source::Xor(lane_mask))
}

/// The `value` of lane `lane_id() + delta`; lanes `32 - delta..` get their own (`shfl.sync.down`,
/// one per 32-bit word): the step of a tree reduction into lane 0.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_down<T: Shuffle>(value: T, delta: u32) -> T {
    value.shuffle(Source::Down(delta))
}

/// The `value` of lane `lane_id() - delta`; lanes `..delta` get their own (`shfl.sync.up`): the
/// step of a scan.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_up<T: Shuffle>(value: T, delta: u32) -> T {
    value.shuffle(Source::Up(delta))
}

/// The `value` of lane `lane % 32` (`shfl.sync.idx`): with the same `lane` everywhere, a
/// broadcast of that lane's value.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub fn shfl_idx<T: Shuffle>(value: T, lane: u32) -> T {
    value.shuffle(Source::Index(lane))
}
