//! The simulator's `wgmma`: an interpreter of the PTX text the GPU runs, with the operand
//! layouts decoded from the descriptors as the PTX ISA defines them ([`descriptor`]),
//! independently of how the kernels build them.
//!
//! Each product is recorded when issued and applied when a `wait_group` retires it, to the true
//! values of its accumulators, which the simulator keeps aside while the kernel holds in-flight
//! markers in their place (`crate::sim::hopper::accumulators`): so an accumulator read or
//! written before the wait, a stage released before the wait that covers it (its operands are read
//! at the wait, as late as the tensor core may read them, and a write over them is checked against
//! what the writer knows retired), and products left in flight are all reported. Every
//! instruction is also checked against the warpgroup's sequence (every thread executes the same
//! `fence`, products, `commit` and `wait`).
//!
//! The device side is [`crate::wgmma`]: off the GPU each of its wrappers hands its PTX text and
//! operands to [`run`].

pub(crate) mod descriptor;
pub(crate) mod product;

use std::panic::Location;

use crate::sim::device;
use crate::sim::hopper::groups::Product;
use product::Mma;

/// The operand types the simulator models.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Operand {
    /// `.bf16`.
    Bf16,
    /// `.f16`.
    F16,
    /// `.tf32`: f32 in shared memory, read with the low 13 bits of the significand ignored.
    Tf32,
    /// `.e4m3`: one byte, [`crate::fp8::E4M3`] (K-major only, `k32` per instruction).
    E4m3,
    /// `.e5m2`: one byte, [`crate::fp8::E5M2`] (K-major only, `k32` per instruction).
    E5m2,
}

impl Operand {
    /// Bytes per element in shared memory.
    pub(crate) fn bytes(self) -> usize {
        match self {
            Operand::E4m3 | Operand::E5m2 => 1,
            Operand::Bf16 | Operand::F16 => 2,
            Operand::Tf32 => 4,
        }
    }

    /// Elements along `k` per instruction: 32 bytes of each row (`k16` of 16-bit types,
    /// `k8` of TF32, `k32` of FP8).
    pub(crate) fn k(self) -> usize {
        32 / self.bytes()
    }
}

/// TF32 as `.tf32` `wgmma` reads an f32: the low 13 bits of the significand dropped (PTX ISA,
/// "wgmma.mma_async": "will truncate lower 13 bits of the 32-bit input data before
/// multiplication is issued"), so toward zero, unit roundoff `2^-10`.
pub(crate) fn tf32_truncate(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & !0x1fff)
}

/// Reads the element of type `ty` at shared-window byte address `address` (already
/// swizzled), widened to f64.
#[track_caller]
pub(crate) fn element(address: usize, ty: Operand) -> f64 {
    let base = crate::sim::device::shared_base();
    if ty == Operand::Tf32 {
        let p = base.wrapping_add(address).cast::<u32>();
        // SAFETY: checked by the simulator (bounds, alignment, initialisation, races).
        let bits = unsafe { crate::mem::load(p, 0) };
        return f64::from(tf32_truncate(f32::from_bits(bits)));
    }
    if matches!(ty, Operand::E4m3 | Operand::E5m2) {
        let p = base.wrapping_add(address);
        // SAFETY: checked by the simulator (bounds, initialisation, races).
        let bits = unsafe { crate::mem::load(p, 0) };
        return match ty {
            Operand::E4m3 => f64::from(crate::fp8::E4M3(bits).to_f32()),
            _ => f64::from(crate::fp8::E5M2(bits).to_f32()),
        };
    }
    let p = base.wrapping_add(address).cast::<u16>();
    // SAFETY: checked by the simulator (bounds, alignment, initialisation, races).
    let bits = unsafe { crate::mem::load(p, 0) };
    match ty {
        Operand::Bf16 => f64::from(f32::from_bits(u32::from(bits) << 16)),
        Operand::F16 => f64::from(half::f16::from_bits(bits).to_f32()),
        Operand::Tf32 | Operand::E4m3 | Operand::E5m2 => unreachable!("read above"),
    }
}

/// The value of an operand token: `{name}` (a named `asm!` operand) or an integer immediate.
#[track_caller]
pub(crate) fn value(token: &str, named: &[(&str, u64)]) -> u64 {
    let token = token.trim();
    if let Some(name) = token.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        return named
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("wgmma PTX: no operand named {name:?}"))
            .1;
    }
    if let Ok(v) = token.parse::<i64>() {
        return v as u64;
    }
    // A 64-bit register the text declared and set (`.reg .b64`, `add.s64`), passed in `named`
    // under its bare name.
    named
        .iter()
        .find(|(n, _)| *n == token)
        .unwrap_or_else(|| panic!("wgmma PTX: {token:?} is not an operand, a set register or an immediate"))
        .1
}

/// Runs the `asm!` template `ptx` of a warpgroup `wgmma` sequence for the running thread:
/// `named` the named operands, `acc` the positional ones (`{i}` is `acc[i]`). Understands
/// `.reg .pred`, `.reg .b64` with `add.s64` (descriptors stepped inside the text), `setp.ne.b32`, `wgmma.fence`, `wgmma.mma_async.sync.aligned` (`m64nNk16` in
/// bf16 or f16, `m64nNk8` in TF32, operands truncated as the tensor core reads them, `m64nNk32`
/// in e4m3 or e5m2, either type for either operand, K-major;
/// shared-memory descriptors for both operands), `commit_group` and `wait_group N`; anything else
/// is a bug of the library's PTX text (a panic). See the module documentation for what a product
/// does in flight and what is checked; the products are exact (f64 sums, added to the accumulator
/// in f64, rounded once to f32): at least as accurate as the tensor core.
#[track_caller]
pub(crate) fn run(ptx: &str, named: &[(&str, u64)], acc: &mut [f32]) {
    run_with(ptx, named, None, acc, Location::caller());
}

/// [`run`] for products whose `A` comes from registers (`{{{a0},{a1},{a2},{a3}}}` lists of named
/// 32-bit operands): `quad[q][r]` is register `a<r>` of lane `q` of the running thread's quad
/// (its own among them), exchanged by the caller, since row `g` of `A` is spread over the quad.
#[track_caller]
pub(crate) fn run_register_a(ptx: &str, named: &[(&str, u64)], quad: &[[u32; 32]; 4], acc: &mut [f32]) {
    run_with(ptx, named, Some(quad), acc, Location::caller());
}

/// [`run`], with the quad's `A` registers where the products take `A` from registers.
fn run_with(
    ptx: &str,
    named: &[(&str, u64)],
    quad: Option<&[[u32; 32]; 4]>,
    acc: &mut [f32],
    at: &'static Location<'static>,
) {
    let lead = device::thread_linear().is_multiple_of(128);
    let mut predicates: Vec<(&str, Option<bool>)> = Vec::new();
    // The named operands and the 64-bit registers the text sets (`.reg .b64`, `add.s64`).
    let mut values: Vec<(&str, u64)> = named.to_vec();
    let mut declared: Vec<&str> = Vec::new();
    let mut set: Option<u32> = None;
    for statement in ptx.split(';') {
        let statement = statement.trim();
        let statement = statement.strip_prefix("{{").unwrap_or(statement).trim();
        if statement.is_empty() || statement == "}}" || statement.starts_with("//") {
            continue;
        }
        let (op, args) = statement.split_once(' ').unwrap_or((statement, ""));
        match op {
            ".reg" => {
                if let Some(names) = args.strip_prefix(".b64 ") {
                    // Declared 64-bit registers: set by `add.s64` before they are read.
                    declared.extend(names.split(',').map(str::trim));
                    continue;
                }
                let names = args.strip_prefix(".pred ").unwrap_or_else(|| {
                    panic!("wgmma PTX: only predicates and .b64 are declared: {statement:?}")
                });
                predicates.extend(names.split(',').map(|n| (n.trim(), None)));
            }
            "add.s64" => {
                let parts: Vec<&str> = args.split(',').map(str::trim).collect();
                let [d, x, y] = parts[..] else {
                    panic!("wgmma PTX: {statement:?}: add takes three operands")
                };
                assert!(
                    declared.contains(&d),
                    "wgmma PTX: {d:?} is not a declared .b64 register"
                );
                let v = value(x, &values).wrapping_add(value(y, &values));
                values.retain(|(n, _)| *n != d);
                values.push((d, v));
            }
            "setp.ne.b32" => {
                let parts: Vec<&str> = args.split(',').map(str::trim).collect();
                let [p, x, y] = parts[..] else {
                    panic!("wgmma PTX: {statement:?}: setp takes three operands")
                };
                let slot = predicates
                    .iter_mut()
                    .find(|(n, _)| *n == p)
                    .unwrap_or_else(|| panic!("wgmma PTX: predicate {p:?} is not declared"));
                slot.1 = Some(value(x, named) as u32 != value(y, named) as u32);
            }
            "wgmma.fence.sync.aligned" => {
                device::wgmma_execute(op.to_string(), at);
                device::wgmma_fence();
            }
            "wgmma.commit_group.sync.aligned" => {
                device::wgmma_execute(op.to_string(), at);
                device::wgmma_commit();
            }
            "wgmma.wait_group.sync.aligned" => {
                let keep: usize = args
                    .trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("wgmma PTX: wait_group {args:?}: {e}"));
                device::wgmma_execute(format!("{op} {keep}"), at);
                retire(keep);
                if let Some(s) = set.or_else(|| device::wgmma_held(acc)) {
                    device::wgmma_settle(s, acc);
                }
            }
            _ if op.starts_with("wgmma.mma_async.") => {
                let mma = Mma::parse(op, args, &values, &predicates, quad);
                device::wgmma_execute(mma.describe(), at);
                let s = *set.get_or_insert_with(|| device::wgmma_set(acc));
                if lead {
                    mma.check_operands();
                }
                device::wgmma_issue(Product { mma, set: s });
            }
            _ => panic!("wgmma PTX: the simulator does not model {statement:?}"),
        }
    }
    device::wgmma_end_block();
}

/// Retires the running thread's oldest groups until at most `keep` remain
/// (`wgmma.wait_group keep`), applying their products to their accumulators' true values.
#[track_caller]
pub(crate) fn retire(keep: usize) {
    for p in device::wgmma_retire(keep) {
        device::wgmma_apply(p.set, |values| p.mma.apply(values));
    }
}

#[cfg(test)]
mod tests {
    use super::descriptor::{swizzle_128b, Descriptor};

    #[test]
    fn descriptor_fields_decode() {
        let d = Descriptor::decode(crate::wgmma::desc_sw128(0x2020, 8192, 1024));
        assert_eq!(
            d,
            Descriptor {
                start: 0x2020,
                lbo: 8192,
                sbo: 1024,
                base_offset: 0,
                swizzle: 1
            }
        );
    }

    #[test]
    fn canonical_addresses_by_hand() {
        // K-major, SBO 1024: (1, 0) is row 1 chunk 0, swizzled to chunk 1; (9, 8) is group 1,
        // row 1, chunk 1, swizzled to chunk 0.
        let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
        assert_eq!(a.address_of(1, 0, false, 2), 128 + 16);
        assert_eq!(a.address_of(9, 8, false, 2), 1024 + 128);
        // MN-major, LBO 8192 (64-column chunks), SBO 1024 (8-row groups): (65, 9) is chunk 1,
        // group 1, row 1, byte 2: 9346, whose 16-byte chunk 0 swaps with row 1.
        let b = Descriptor::decode(crate::wgmma::desc_sw128(0, 8192, 1024));
        assert_eq!(b.address_of(65, 9, true, 2), 9346 + 16);
    }

    #[test]
    fn tf32_k_major_addresses_by_hand() {
        // 4-byte elements, 32 per 128-byte row, SBO 1024: (1, 0) is row 1 chunk 0, swizzled
        // to chunk 1; (9, 5) is group 1, row 1, byte 20 (chunk 1), swizzled to chunk 0;
        // (2, 31) is row 2, byte 124 (chunk 7), swizzled to chunk 5.
        let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
        assert_eq!(a.address_of(1, 0, false, 4), 128 + 16);
        assert_eq!(a.address_of(9, 5, false, 4), 1024 + 128 + 4);
        assert_eq!(a.address_of(2, 31, false, 4), 256 + 5 * 16 + 12);
        // The second step of 8 along k starts 32 bytes on: its k = 0 is the first's k = 8.
        let step = Descriptor::decode(crate::wgmma::desc_sw128(32, 16, 1024));
        for mn in 0..16 {
            for k in 0..8 {
                assert_eq!(
                    step.address_of(mn, k, false, 4),
                    a.address_of(mn, k + 8, false, 4)
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "only 16-bit types transpose")]
    fn tf32_has_no_mn_major_layout() {
        let a = Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
        let _ = a.address_of(0, 0, true, 4);
    }

    #[test]
    fn tf32_truncation_drops_the_low_13_bits() {
        use super::tf32_truncate;
        // 1 + 2^-11 + 2^-12 truncates to 1 (rounding would give 1 + 2^-10).
        let x = 1.0 + f32::powi(2.0, -11) + f32::powi(2.0, -12);
        assert_eq!(tf32_truncate(x), 1.0);
        assert_eq!(tf32_truncate(-x), -1.0);
        let y = 1.0 + f32::powi(2.0, -10);
        assert_eq!(tf32_truncate(y), y);
        assert_eq!(tf32_truncate(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn tf32_ptx_has_four_k8_products_without_transpose_operands() {
        let ptx = crate::wgmma::MMA_TF32_M64N256K32_PTX;
        let lines: Vec<&str> = ptx.lines().filter(|l| l.starts_with("wgmma.mma_async")).collect();
        assert_eq!(lines.len(), 4);
        for (s, line) in lines.iter().enumerate() {
            assert!(line.starts_with("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "));
            let tail = format!(
                "}}}}, {{a{s}}}, {{b{s}}}, {}, 1, 1;",
                if s == 0 { "p" } else { "t" }
            );
            assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
        }
    }

    #[test]
    fn e4m3_ptx_has_four_k32_products_without_transpose_operands() {
        for (ptx, n) in [
            (crate::wgmma::MMA_E4M3_M64N256K128_PTX, 256),
            (crate::wgmma::MMA_E4M3_M64N128K128_ASYNC_PTX, 128),
            (crate::wgmma::MMA_E4M3_M64N64K128_PTX, 64),
        ] {
            let lines: Vec<&str> = ptx.lines().filter(|l| l.starts_with("wgmma.mma_async")).collect();
            assert_eq!(lines.len(), 4);
            for (s, line) in lines.iter().enumerate() {
                let head = format!("wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3 ");
                assert!(line.starts_with(&head), "{line:?}");
                let tail = format!(
                    "}}}}, {{a{s}}}, {{b{s}}}, {}, 1, 1;",
                    if s == 0 { "p" } else { "t" }
                );
                assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
            }
        }
        // The asynchronous twin leaves the group in flight: no wait in its text.
        assert!(!crate::wgmma::MMA_E4M3_M64N128K128_ASYNC_PTX.contains("wait_group"));
        assert!(crate::wgmma::MMA_E4M3_M64N256K128_PTX.contains("wait_group"));
    }

    /// An FP8 product line parses as `k32` of one-byte elements, without imm-trans operands
    /// (FP8 `wgmma` reads both operands K-major), and a line with them is refused.
    #[test]
    fn fp8_lines_parse_as_k32_of_bytes() {
        use super::product::Mma;
        use super::Operand;
        let acc: String = (0..32).map(|i| format!("{{{i}}}")).collect::<Vec<_>>().join(", ");
        let line = |ty: &str, tail: &str| {
            (
                format!("wgmma.mma_async.sync.aligned.m64n64k32.f32.{ty}.{ty}"),
                format!("{{{{{acc}}}}}, {{a}}, {{b}}, 1, 1, 1{tail}"),
            )
        };
        let named = [
            ("a", crate::wgmma::desc_sw128(0, 16, 1024)),
            ("b", crate::wgmma::desc_sw128(8192, 16, 1024)),
        ];
        for (ty, operand) in [("e4m3", Operand::E4m3), ("e5m2", Operand::E5m2)] {
            let (op, args) = line(ty, "");
            let mma = Mma::parse(&op, &args, &named, &[], None);
            assert!(mma.describe().contains(ty), "{}", mma.describe());
            assert_eq!((operand.bytes(), operand.k()), (1, 32));
            let (op, args) = line(ty, ", 0, 0");
            let refused = std::panic::catch_unwind(|| Mma::parse(&op, &args, &named, &[], None));
            assert!(refused.is_err(), "{ty} with imm-trans operands was accepted");
        }
        // One-byte K-major addresses: element (mn, k) at byte k of row mn, then the swizzle:
        // (9, 31) is group 1, row 1, chunk 1, swizzled to chunk 0, byte 15.
        let a = super::descriptor::Descriptor::decode(crate::wgmma::desc_sw128(0, 16, 1024));
        assert_eq!(a.address_of(0, 17, false, 1), 17);
        assert_eq!(a.address_of(1, 0, false, 1), 128 + 16);
        assert_eq!(a.address_of(9, 31, false, 1), 1024 + 128 + 15);
    }

    /// The end of step `s`'s line of a register-`A` product: `A` from `a4s..a4s+3`, `B` from the
    /// named descriptor `{b}` at step 0 and the register `<reg>s` the text set after, scale-d
    /// from `p` at step 0 and `t` after, then imm-trans-b `trans_b`.
    fn register_a_tail(s: usize, reg: char, trans_b: u32) -> String {
        let r = 4 * s;
        let b = if s == 0 {
            "{b}".to_string()
        } else {
            format!("{reg}{s}")
        };
        format!(
            "{{{{{{a{r}}},{{a{}}},{{a{}}},{{a{}}}}}}}, {b}, {}, 1, 1, {trans_b};",
            r + 1,
            r + 2,
            r + 3,
            if s == 0 { "p" } else { "t" }
        )
    }

    /// The attention products' PTX: the scores read `B` K-major (imm-trans-b 0), the `P V`
    /// products take `A` from four named registers per step (`a4s..a4s+3`, no imm-trans-a) and
    /// read `V` N-major; a register `A` line parses only with the quad's registers.
    #[test]
    fn attention_lines_parse() {
        use super::product::Mma;
        let lines = |ptx: &str| -> Vec<String> {
            ptx.lines()
                .filter(|l| l.starts_with("wgmma.mma_async"))
                .map(str::to_string)
                .collect()
        };
        for (s, line) in lines(crate::wgmma::MMA_BF16_M64N128K64_KB_ASYNC_PTX)
            .iter()
            .enumerate()
        {
            let (a, b) = match s {
                0 => ("{a}".to_string(), "{b}".to_string()),
                _ => (format!("a{s}"), format!("b{s}")),
            };
            let tail = format!("{a}, {b}, {}, 1, 1, 0, 0;", if s == 0 { "p" } else { "t" });
            assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
        }
        let rs = lines(crate::wgmma::MMA_F16_M64N64K128_RS_ASYNC_PTX);
        assert_eq!(rs.len(), 8);
        for (s, line) in rs.iter().enumerate() {
            assert!(line.starts_with("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "));
            // Step 0 reads the named descriptor, step `s` the register `ds` the text set.
            let tail = register_a_tail(s, 'd', 1);
            assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
        }
        let (op, args) = rs[0].split_once(' ').expect("an opcode and operands");
        let named: Vec<(&str, u64)> = vec![("b", crate::wgmma::desc_sw128(0, 16384, 1024))];
        let quad: [[u32; 32]; 4] = core::array::from_fn(|q| core::array::from_fn(|r| (100 * q + r) as u32));
        let mma = Mma::parse(
            op,
            args.trim_end_matches(';'),
            &named,
            &[("p", Some(true))],
            Some(&quad),
        );
        assert!(mma.describe().contains("trans-b 1"), "{}", mma.describe());
        let refused = std::panic::catch_unwind(|| {
            Mma::parse(op, args.trim_end_matches(';'), &named, &[("p", Some(true))], None)
        });
        assert!(
            refused.is_err(),
            "a register A line parsed without the quad's registers"
        );
    }

    /// The scores with `Q` from registers: four steps of `A` from `a4s..a4s+3` against `K`
    /// K-major (imm-trans-b 0), the descriptor stepped by 32 bytes (`b1..b3`).
    #[test]
    fn register_q_scores_lines_parse() {
        use super::product::Mma;
        for ptx in [
            crate::wgmma::MMA_BF16_M64N128K64_RK_ASYNC_PTX,
            crate::wgmma::MMA_F16_M64N64K64_RK_ASYNC_PTX,
        ] {
            let rk: Vec<&str> = ptx.lines().filter(|l| l.starts_with("wgmma.mma_async")).collect();
            assert_eq!(rk.len(), 4);
            for (s, line) in rk.iter().enumerate() {
                let tail = register_a_tail(s, 'b', 0);
                assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
            }
            let (op, args) = rk[0].split_once(' ').expect("an opcode and operands");
            let named: Vec<(&str, u64)> = vec![("b", crate::wgmma::desc_sw128(0, 16384, 1024))];
            let quad: [[u32; 32]; 4] = [[0; 32]; 4];
            let mma = Mma::parse(
                op,
                args.trim_end_matches(';'),
                &named,
                &[("p", Some(true))],
                Some(&quad),
            );
            assert!(mma.describe().contains("trans-b 0"), "{}", mma.describe());
        }
    }

    /// The backward's `dQ` products: every step reads both operands MN-major (imm-trans-a 1,
    /// imm-trans-b 1) from descriptors the text steps by 16 rows of 128 bytes (`+128` in the
    /// start field), 8 steps for `k128` and 4 for `k64`; the first step's scale-d is the caller's.
    #[test]
    fn mn_major_lines_parse_with_both_transposes() {
        use super::product::Mma;
        for (ptx, steps, ty) in [
            (crate::wgmma::MMA_BF16_M64N64K128_MN_ASYNC_PTX, 8, "bf16"),
            (crate::wgmma::MMA_F16_M64N64K128_MN_ASYNC_PTX, 8, "f16"),
            (crate::wgmma::MMA_BF16_M64N64K64_MN_ASYNC_PTX, 4, "bf16"),
            (crate::wgmma::MMA_F16_M64N64K64_MN_ASYNC_PTX, 4, "f16"),
        ] {
            assert!(!ptx.contains("wait_group"), "left in flight");
            let lines: Vec<&str> = ptx.lines().filter(|l| l.starts_with("wgmma.mma_async")).collect();
            assert_eq!(lines.len(), steps);
            for (s, line) in lines.iter().enumerate() {
                let head = format!("wgmma.mma_async.sync.aligned.m64n64k16.f32.{ty}.{ty} ");
                assert!(line.starts_with(&head), "{line:?}");
                let (a, b) = match s {
                    0 => ("{a}".to_string(), "{b}".to_string()),
                    _ => (format!("a{s}"), format!("b{s}")),
                };
                let tail = format!("{a}, {b}, {}, 1, 1, 1, 1;", if s == 0 { "p" } else { "t" });
                assert!(line.ends_with(&tail), "{line:?} should end {tail:?}");
                if s > 0 {
                    let step = format!("add.s64 a{s}, {{a}}, {};", 128 * s);
                    assert!(ptx.contains(&step), "{step:?} in the text");
                    let step = format!("add.s64 b{s}, {{b}}, {};", 128 * s);
                    assert!(ptx.contains(&step), "{step:?} in the text");
                }
            }
            let (op, args) = lines[0].split_once(' ').expect("an opcode and operands");
            let named: Vec<(&str, u64)> = vec![
                ("a", crate::wgmma::desc_sw128(0, 8192, 1024)),
                ("b", crate::wgmma::desc_sw128(16384, 16384, 1024)),
            ];
            let mma = Mma::parse(
                op,
                args.trim_end_matches(';'),
                &named,
                &[("p", Some(false))],
                None,
            );
            let d = mma.describe();
            assert!(
                d.contains("trans-a 1") && d.contains("trans-b 1") && d.contains("scale-d 0"),
                "{d}"
            );
        }
    }

    #[test]
    fn swizzle_agrees_with_the_copy_engine_model() {
        for address in (0..8192).step_by(2) {
            assert_eq!(
                swizzle_128b(address),
                crate::tma::swizzle_128b(address),
                "{address}"
            );
        }
    }
}
