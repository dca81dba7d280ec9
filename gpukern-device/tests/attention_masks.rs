//! The shipped attention masks against their own rules, on the CPU: `General` of each kind says
//! what the mask of that kind says, pair by pair (as `Mask::row` gives it too, with the same
//! scores); `keys` holds every key a block's rows keep, `full_keys` only keys they all keep,
//! `tile` agrees with `keep`, a key's `rows` are its rows exactly where the mask says
//! `KEY_ROWS_EXACT`; and a planted wrong `full_keys` is caught. (`Document` reads device
//! memory: the simulator's trials, `tests/kernels/attention_masks.rs`, check it.)

use gpukern_device::attention::{
    Alibi, BentOf, BiasOf, Causal, General, KeysOf, Mask, MaskArgs, MaskShape, NoMask, Shipped,
    SlidingWindow, SoftCap, TileMask,
};

/// Every check of `mask` against `keep` of `reference` on a call of `shape`: pairs, and blocks of
/// rows `block` tall over keys `tile` wide.
fn check_mask<M: Mask, R: Mask>(
    mask: M,
    reference: R,
    shape: MaskShape,
    block: usize,
    tile: usize,
) -> Vec<String> {
    let mut failures = Vec::new();
    // The mask as a row's kernels see it: the same pairs, the same scores and derivatives as the
    // mask itself.
    for q in 0..shape.q_len {
        let row = mask.row(0, 1, q);
        for kv in 0..shape.kv_len {
            let want = reference.keep(0, 1, q, kv);
            if mask.keep(0, 1, q, kv) != want || row.keep(0, 1, q, kv) != want {
                failures.push(format!("keep({q}, {kv}) is not {want}"));
            }
            if M::SCORE_MOD && mask.modifies_scores() {
                for s in [-3.5f32, 0.0, 0.75, 40.0] {
                    let (score, grad) = (mask.score(s, 0, 1, q, kv), mask.score_grad(s, 0, 1, q, kv));
                    if row.score(s, 0, 1, q, kv) != score || row.score_grad(s, 0, 1, q, kv) != grad {
                        failures.push(format!("row: score({s}, {q}, {kv}) differs from the mask's"));
                    }
                }
            }
        }
    }
    // `KEY_ROWS_EXACT`: each key's `rows` is exactly the rows that keep it, for every head.
    if M::KEY_ROWS_EXACT {
        for h in 0..2 {
            for kv in 0..shape.kv_len {
                let band = mask.rows(0, h, kv..kv + 1);
                let band = band.start.min(shape.q_len)..band.end.min(shape.q_len);
                if let Some(q) = (0..shape.q_len).find(|&q| band.contains(&q) != reference.keep(0, h, q, kv))
                {
                    failures.push(format!(
                        "head {h}, key {kv}: rows {band:?} are not the rows that keep it (row {q})"
                    ));
                }
            }
        }
    }
    for q0 in (0..shape.q_len).step_by(block) {
        let rows = q0..(q0 + block).min(shape.q_len);
        let (keys, full) = (mask.keys(0, 1, rows.clone()), mask.full_keys(0, 1, rows.clone()));
        for q in rows.clone() {
            for kv in 0..shape.kv_len {
                let kept = reference.keep(0, 1, q, kv);
                if kept && !keys.contains(&kv) {
                    failures.push(format!(
                        "rows {rows:?}: key {kv} kept by row {q}, outside keys {keys:?}"
                    ));
                }
                if !kept && full.contains(&kv) {
                    failures.push(format!(
                        "rows {rows:?}: key {kv} dropped by row {q}, inside full keys {full:?}"
                    ));
                }
            }
        }
        for k0 in (0..shape.kv_len).step_by(tile) {
            let kv = k0..(k0 + tile).min(shape.kv_len);
            // `rows` holds every row that keeps a key of the tile (its default, every row, too).
            let band = mask.rows(0, 1, kv.clone());
            for q in (0..shape.q_len).filter(|q| !band.contains(q)) {
                if let Some(k) = kv.clone().find(|&k| reference.keep(0, 1, q, k)) {
                    failures.push(format!(
                        "keys {kv:?}: row {q} keeps key {k}, outside rows {band:?}"
                    ));
                }
            }
            let kept = rows
                .clone()
                .flat_map(|q| kv.clone().map(move |k| (q, k)))
                .filter(|&(q, k)| reference.keep(0, 1, q, k))
                .count();
            let all = rows.len() * kv.len();
            let ok = match mask.tile(0, 1, rows.clone(), kv.clone()) {
                TileMask::Empty => kept == 0,
                TileMask::Full => kept == all,
                TileMask::Partial => true,
            };
            if !ok {
                failures.push(format!(
                    "rows {rows:?} keys {kv:?}: tile says otherwise ({kept} of {all} kept)"
                ));
            }
        }
    }
    failures
}

/// The shapes: square, more rows than keys, more keys than rows, ragged against the blocks.
const SHAPES: [(usize, usize); 4] = [(70, 70), (45, 20), (20, 77), (131, 129)];

fn args(int: usize, float: f32) -> MaskArgs {
    MaskArgs {
        data: core::ptr::null(),
        int,
        float,
    }
}

#[test]
fn general_is_each_shipped_mask() {
    let mut failures = Vec::new();
    for (q_len, kv_len) in SHAPES {
        let shape = MaskShape {
            q_len,
            kv_len,
            heads: 4,
        };
        let general = |kind, value| General::new(args(General::int(kind, value), 3.0), shape);
        let mut each = |what: &str, f: Vec<String>| {
            failures.extend(
                f.into_iter()
                    .take(3)
                    .map(|x| format!("{what} {q_len}x{kv_len}: {x}")),
            )
        };
        for (block, tile) in [(16, 8), (7, 5)] {
            each(
                "none",
                check_mask(
                    general(Shipped::None, 0),
                    NoMask::new(args(0, 0.0), shape),
                    shape,
                    block,
                    tile,
                ),
            );
            each(
                "causal",
                check_mask(
                    general(Shipped::Causal, 0),
                    Causal::new(args(0, 0.0), shape),
                    shape,
                    block,
                    tile,
                ),
            );
            for window in [1, 5, 16, 200] {
                each(
                    &format!("window {window}"),
                    check_mask(
                        general(Shipped::Window, window),
                        SlidingWindow::new(args(window, 0.0), shape),
                        shape,
                        block,
                        tile,
                    ),
                );
            }
            each(
                "alibi",
                check_mask(
                    general(Shipped::Alibi, 0),
                    Alibi::new(args(0, 0.0), shape),
                    shape,
                    block,
                    tile,
                ),
            );
            for causal in [0, 1] {
                each(
                    &format!("softcap causal={causal}"),
                    check_mask(
                        general(Shipped::SoftCap, causal),
                        SoftCap::new(args(causal, 3.0), shape),
                        shape,
                        block,
                        tile,
                    ),
                );
            }
            // The shipped masks' own rules, each against itself.
            each(
                "Causal",
                check_mask(
                    Causal::new(args(0, 0.0), shape),
                    Causal::new(args(0, 0.0), shape),
                    shape,
                    block,
                    tile,
                ),
            );
            each(
                "SlidingWindow",
                check_mask(
                    SlidingWindow::new(args(9, 0.0), shape),
                    SlidingWindow::new(args(9, 0.0), shape),
                    shape,
                    block,
                    tile,
                ),
            );
        }
        // The scores: ALiBi's bias and the soft cap, as General gives them.
        let (alibi, reference) = (
            general(Shipped::Alibi, 0).row(0, 2, q_len - 1),
            Alibi::new(args(0, 0.0), shape),
        );
        let (got, want) = (
            alibi.score(0.5, 0, 2, q_len - 1, 0),
            reference.score(0.5, 0, 2, q_len - 1, 0),
        );
        if (got - want).abs() > 1e-6 {
            failures.push(format!("alibi score {got} != {want}"));
        }
        let cap = general(Shipped::SoftCap, 0);
        let (got, want) = (cap.score(2.0, 0, 0, 0, 0), 3.0 * (2.0f32 / 3.0).tanh());
        if (got - want).abs() > 1e-5
            || !cap.modifies_scores()
            || general(Shipped::Window, 4).modifies_scores()
        {
            failures.push(format!(
                "soft cap score {got} != {want}, or modifies_scores wrong"
            ));
        }
        // The scores' derivatives: 1 for ALiBi's bias, `1 - tanh^2` for the soft cap.
        for s in [-7.0f32, -0.5, 0.0, 2.0, 40.0] {
            let want = 1.0 - (s / 3.0).tanh().powi(2);
            let got = cap.score_grad(s, 0, 0, 0, 0);
            if (got - want).abs() > 1e-5 || alibi.score_grad(s, 0, 2, q_len - 1, 0) != 1.0 {
                failures.push(format!(
                    "soft cap score_grad({s}) {got} != {want}, or alibi's not 1"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A planted mask whose `full_keys` claims one key too many must fail the check.
#[test]
fn a_planted_wrong_full_range_is_caught() {
    #[derive(Clone, Copy)]
    struct Wrong(Causal);
    impl Mask for Wrong {
        fn new(args: MaskArgs, shape: MaskShape) -> Self {
            Wrong(Causal::new(args, shape))
        }
        fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
            self.0.keep(b, h, q, kv)
        }
        fn keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
            self.0.keys(b, h, q)
        }
        fn full_keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
            let full = self.0.full_keys(b, h, q);
            full.start..full.end + 1
        }
    }
    let shape = MaskShape {
        q_len: 40,
        kv_len: 40,
        heads: 1,
    };
    let failures = check_mask(
        Wrong::new(args(0, 0.0), shape),
        Causal::new(args(0, 0.0), shape),
        shape,
        8,
        8,
    );
    assert!(!failures.is_empty(), "the planted full range passed");
}

/// A planted mask whose `rows` leaves out the first row that sees a tile must fail the check.
#[test]
fn a_planted_wrong_row_band_is_caught() {
    #[derive(Clone, Copy)]
    struct Wrong(SlidingWindow);
    impl Mask for Wrong {
        fn new(args: MaskArgs, shape: MaskShape) -> Self {
            Wrong(SlidingWindow::new(args, shape))
        }
        fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
            self.0.keep(b, h, q, kv)
        }
        fn keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
            self.0.keys(b, h, q)
        }
        fn rows(&self, b: usize, h: usize, kv: core::ops::Range<usize>) -> core::ops::Range<usize> {
            let band = self.0.rows(b, h, kv);
            (band.start + 1).min(band.end)..band.end
        }
    }
    let shape = MaskShape {
        q_len: 40,
        kv_len: 40,
        heads: 1,
    };
    let failures = check_mask(
        Wrong::new(args(6, 0.0), shape),
        SlidingWindow::new(args(6, 0.0), shape),
        shape,
        8,
        8,
    );
    assert!(!failures.is_empty(), "the planted row band passed");
}

/// A planted mask that says `KEY_ROWS_EXACT` but gives each key one row more than see it (a band
/// that is right for the default's rule, every row that sees a key inside it) must fail.
#[test]
fn a_planted_inexact_key_band_is_caught() {
    #[derive(Clone, Copy)]
    struct Wide(SlidingWindow);
    impl Mask for Wide {
        const KEY_ROWS_EXACT: bool = true;
        fn new(args: MaskArgs, shape: MaskShape) -> Self {
            Wide(SlidingWindow::new(args, shape))
        }
        fn keep(&self, b: usize, h: usize, q: usize, kv: usize) -> bool {
            self.0.keep(b, h, q, kv)
        }
        fn keys(&self, b: usize, h: usize, q: core::ops::Range<usize>) -> core::ops::Range<usize> {
            self.0.keys(b, h, q)
        }
        fn rows(&self, b: usize, h: usize, kv: core::ops::Range<usize>) -> core::ops::Range<usize> {
            let band = self.0.rows(b, h, kv);
            band.start.saturating_sub(1)..band.end
        }
    }
    let shape = MaskShape {
        q_len: 40,
        kv_len: 40,
        heads: 1,
    };
    let failures = check_mask(
        Wide::new(args(6, 0.0), shape),
        SlidingWindow::new(args(6, 0.0), shape),
        shape,
        8,
        8,
    );
    assert!(
        failures
            .iter()
            .any(|f| f.contains("are not the rows that keep it")),
        "the planted inexact band passed: {failures:?}"
    );
}

/// `KeysOf<General>` keeps what `General` keeps, tile by tile and row band by row band, and
/// modifies no score.
#[test]
fn keys_of_is_the_mask_without_its_scores() {
    const { assert!(!<KeysOf<General> as Mask>::SCORE_MOD && <KeysOf<General> as Mask>::CONTIGUOUS) };
    let mut failures = Vec::new();
    for (q_len, kv_len) in SHAPES {
        let shape = MaskShape {
            q_len,
            kv_len,
            heads: 4,
        };
        for (kind, value) in [(Shipped::Window, 7), (Shipped::Causal, 0), (Shipped::SoftCap, 1)] {
            let a = args(General::int(kind, value), 3.0);
            let f = check_mask(
                KeysOf::<General>::new(a, shape),
                General::new(a, shape),
                shape,
                16,
                8,
            );
            failures.extend(
                f.into_iter()
                    .take(3)
                    .map(|x| format!("{kind:?} {q_len}x{kv_len}: {x}")),
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Failures of `W` (a `KeysAnd` of `General`, made by `make`) against `General` on every
/// shape and each `(kind, value, taken)`: the same pairs kept, tile by tile and row band by row
/// band; scores modified where `taken`, as `General` modifies them and with its derivative
/// (`score`, `score_grad`, and `score_with_grad` within a rounding of the `tanh`), elsewhere
/// `s` itself and derivative 1; `score_is_bias` as `is_bias`.
fn wrapper_failures<W: Mask>(
    make: fn(MaskArgs, MaskShape) -> W,
    kinds: &[(Shipped, usize, bool)],
    is_bias: bool,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (q_len, kv_len) in SHAPES {
        let shape = MaskShape {
            q_len,
            kv_len,
            heads: 4,
        };
        for &(kind, value, taken) in kinds {
            let a = args(General::int(kind, value), 3.0);
            let (wrapped, general) = (make(a, shape), General::new(a, shape));
            let f = check_mask(wrapped, general, shape, 16, 8);
            failures.extend(
                f.into_iter()
                    .take(3)
                    .map(|x| format!("{kind:?} {q_len}x{kv_len}: {x}")),
            );
            if wrapped.modifies_scores() != taken || wrapped.score_is_bias() != is_bias {
                failures.push(format!(
                    "{kind:?}: modifies_scores {}, score_is_bias {}",
                    wrapped.modifies_scores(),
                    wrapped.score_is_bias()
                ));
            }
            for (h, q, kv) in [(0, 0, 0), (3, q_len - 1, 0), (1, q_len / 2, kv_len - 1)] {
                for s in [-40.0f32, -2.5, 0.0, 0.75, 9.0] {
                    let (want, want_grad) = if taken {
                        (general.score(s, 0, h, q, kv), general.score_grad(s, 0, h, q, kv))
                    } else {
                        (s, 1.0)
                    };
                    let (apart, apart_grad) =
                        (wrapped.score(s, 0, h, q, kv), wrapped.score_grad(s, 0, h, q, kv));
                    let (got, grad) = wrapped.score_with_grad(s, 0, h, q, kv);
                    let close = |x: f32, y: f32| (x - y).abs() <= 1e-5 * y.abs().max(1.0);
                    if apart.to_bits() != want.to_bits()
                        || apart_grad.to_bits() != want_grad.to_bits()
                        || !close(got, want)
                        || !close(grad, want_grad)
                    {
                        failures.push(format!(
                            "{kind:?} ({h}, {q}, {kv}) at {s}: ({apart}, {apart_grad}), at once ({got}, {grad}), want ({want}, {want_grad})"
                        ));
                    }
                }
            }
        }
    }
    failures
}

/// `BiasOf<General>` keeps what `General` keeps; it modifies scores where `General` adds a bias
/// (ALiBi), by the same amount, and nowhere else (the soft cap's scores come back as they went
/// in).
#[test]
fn bias_of_is_the_mask_with_its_biases_only() {
    const {
        assert!(
            <BiasOf<General> as Mask>::SCORE_MOD
                && <BiasOf<General> as Mask>::SCORE_IS_BIAS
                && <BiasOf<General> as Mask>::CONTIGUOUS
        )
    };
    let kinds = [
        (Shipped::Window, 7, false),
        (Shipped::Causal, 0, false),
        (Shipped::SoftCap, 1, false),
        (Shipped::Alibi, 1, true),
    ];
    let failures = wrapper_failures(BiasOf::<General>::new, &kinds, true);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `BentOf<General>` keeps what `General` keeps; it modifies scores where `General` bends them
/// (the soft cap), by the same amount and with the same derivative, and nowhere else (ALiBi's
/// scores come back as they went in, derivative 1).
#[test]
fn bent_of_is_the_mask_with_its_bends_only() {
    const {
        assert!(
            <BentOf<General> as Mask>::SCORE_MOD
                && !<BentOf<General> as Mask>::SCORE_IS_BIAS
                && <BentOf<General> as Mask>::CONTIGUOUS
        )
    };
    let kinds = [
        (Shipped::Window, 7, false),
        (Shipped::Causal, 0, false),
        (Shipped::Alibi, 1, false),
        (Shipped::SoftCap, 1, true),
        (Shipped::SoftCap, 0, true),
    ];
    let failures = wrapper_failures(BentOf::<General>::new, &kinds, false);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// ALiBi's bias, as `BiasOf<General>` gives it (`score(0, ..)`), is a line in `kv - q`: the same
/// for pairs shifted along both, and changing by the same step per key as it does, negated, per
/// query. The one-kernel backward's masked instances take it so (`bias_line`: the mask asked at
/// two points per tile, the rest of the tile on their line), so a mask whose bias bent would fail
/// here first.
#[test]
fn alibi_bias_is_a_line_in_the_distance() {
    let (q_len, kv_len, heads) = (300, 333, 8);
    let shape = MaskShape { q_len, kv_len, heads };
    let mask = BiasOf::<General>::new(args(General::int(Shipped::Alibi, 1), 0.0), shape);
    let bias = |h: usize, q: usize, kv: usize| f64::from(mask.score(0.0, 0, h, q, kv));
    let mut failures = Vec::new();
    for h in [0, 3, heads - 1] {
        let step = bias(h, 10, 41) - bias(h, 10, 40);
        for (q, kv) in [(0, 0), (5, 40), (150, 7), (250, 300), (298, 331)] {
            let (shifted, here) = (bias(h, q + 1, kv + 1), bias(h, q, kv));
            let tolerance = 1e-6 * here.abs().max(1.0);
            if (shifted - here).abs() > tolerance
                || (bias(h, q, kv + 1) - here - step).abs() > tolerance
                || (bias(h, q + 1, kv) - here + step).abs() > tolerance
            {
                failures.push(format!(
                    "head {h} ({q}, {kv}): {here}, shifted {shifted}, step {step}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
