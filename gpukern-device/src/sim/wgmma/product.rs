//! One `wgmma.mma_async` line as the simulator runs it: parsed when issued (its operands' values
//! then), applied to the issuing thread's accumulators when a `wait_group` retires it, and, on the
//! warpgroup's first thread, its shared-memory operands checked when issued: their bounds, the
//! proxy fence after ordinary stores to them, the copies writing them known complete, and that the
//! descriptor reads the tile the way the copy engine wrote it.

use super::descriptor::Descriptor;
use super::{element, value, Operand};
use crate::sim::device;
use crate::sim::hopper::violation;
use crate::sim::Rule;

/// One parsed product.
pub(crate) struct Mma {
    /// The opcode with its modifiers.
    op: String,
    /// The `N` of `m64nNkK`.
    n: usize,
    ty: Operand,
    /// `B`'s type: `ty` but for the mixed FP8 kinds (`.e4m3.e5m2`, `.e5m2.e4m3`).
    ty_b: Operand,
    /// The accumulator operand indices, in the order of the instruction's list.
    list: Vec<usize>,
    /// The descriptors, raw and decoded.
    a_bits: u64,
    b_bits: u64,
    a: Descriptor,
    b: Descriptor,
    /// The imm-trans bits (16-bit types only).
    a_mn_major: bool,
    b_mn_major: bool,
    /// Whether the product adds to the accumulators (scale-d).
    scale_d: bool,
    /// The product of imm-scale-a and imm-scale-b.
    sign: f64,
    /// `A` from registers: the four registers of each lane `q` of the issuing thread's quad
    /// (`regs[q][r]`), read when the product was issued; `None` for a descriptor.
    a_regs: Option<[[u32; 4]; 4]>,
}

impl Mma {
    /// Parses one `wgmma.mma_async` (`op` the opcode with its modifiers, `args` its operands),
    /// its operands' values as they are now.
    // `x % d == 0` rather than `is_multiple_of` (Rust 1.87): gpukern's minimum Rust is 1.85.
    #[allow(clippy::manual_is_multiple_of)]
    #[track_caller]
    pub(crate) fn parse(
        op: &str,
        args: &str,
        named: &[(&str, u64)],
        predicates: &[(&str, Option<bool>)],
        quad: Option<&[[u32; 32]; 4]>,
    ) -> Mma {
        let shape = op.strip_prefix("wgmma.mma_async.sync.aligned.m64n");
        let typed = |suffix: &str, ty: Operand| {
            shape
                .and_then(|rest| rest.strip_suffix(suffix))
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| (n, ty))
        };
        // The mixed FP8 kinds: `A` of the first type, `B` of the second.
        let mixed = |suffix: &str, a: Operand, b: Operand| typed(suffix, a).map(|(n, _)| (n, a, b));
        let (n, ty, ty_b) = mixed("k32.f32.e4m3.e5m2", Operand::E4m3, Operand::E5m2)
            .or_else(|| mixed("k32.f32.e5m2.e4m3", Operand::E5m2, Operand::E4m3))
            .or_else(|| {
                typed("k16.f32.bf16.bf16", Operand::Bf16)
                    .or_else(|| typed("k16.f32.f16.f16", Operand::F16))
                    .or_else(|| typed("k8.f32.tf32.tf32", Operand::Tf32))
                    .or_else(|| typed("k32.f32.e4m3.e4m3", Operand::E4m3))
                    .or_else(|| typed("k32.f32.e5m2.e5m2", Operand::E5m2))
                    .map(|(n, t)| (n, t, t))
            })
            .unwrap_or_else(|| {
                panic!(
                    "wgmma PTX: the simulator models m64nNk16.f32.{{bf16,f16}}, m64nNk8.f32.tf32.tf32 and \
                     m64nNk32.f32.{{e4m3,e5m2}}.{{e4m3,e5m2}} only, not {op:?}"
                )
            });
        assert!(n % 8 == 0 && (8..=256).contains(&n), "wgmma PTX: N = {n}");
        // The accumulator list `{{{i},{j},...}}` (its last operand's `}` then the literal `}}`),
        // then the seven scalar operands.
        let list_end = args
            .find("}}}")
            .unwrap_or_else(|| panic!("wgmma PTX: no accumulator list in {args:?}"))
            + 1;
        let list: Vec<usize> = args[..list_end]
            .trim()
            .trim_start_matches("{{")
            .split(',')
            .map(|t| {
                t.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .parse()
                    .unwrap_or_else(|e| panic!("wgmma PTX: accumulator {t:?}: {e}"))
            })
            .collect();
        assert_eq!(
            list.len(),
            n / 2,
            "wgmma PTX: m64n{n} has {} accumulators per thread",
            n / 2
        );
        let mut rest: Vec<&str> = args[list_end + 2..]
            .trim_start_matches(',')
            .split(',')
            .map(str::trim)
            .collect();
        // `A` from registers: a list of four named 32-bit operands `{{{aI},{aJ},{aK},{aL}}}` in
        // place of the descriptor (and no imm-trans-a).
        let a_regs = if rest.first().is_some_and(|t| t.starts_with("{{")) {
            assert!(rest.len() >= 4, "wgmma PTX: {args:?}: a register A list of four");
            let quad = quad.unwrap_or_else(|| panic!("wgmma PTX: {args:?}: register A without its quad"));
            let index: Vec<usize> = rest[..4]
                .iter()
                .map(|t| {
                    let name = t.trim_matches(|c| c == '{' || c == '}');
                    name.strip_prefix('a')
                        .and_then(|i| i.parse::<usize>().ok())
                        .filter(|&i| i < 32)
                        .unwrap_or_else(|| panic!("wgmma PTX: register A operand {t:?}: want a0..a31"))
                })
                .collect();
            rest.drain(..4);
            // Placeholders where a descriptor and imm-trans-a would be.
            rest.insert(0, "0");
            rest.insert(5, "0");
            Some(core::array::from_fn(|q| {
                core::array::from_fn(|r| quad[q][index[r]])
            }))
        } else {
            None
        };
        // `.tf32` and the FP8 types take no imm-trans operands (both operands K-major); the
        // 16-bit types do.
        let k_major_only = matches!(ty, Operand::Tf32 | Operand::E4m3 | Operand::E5m2);
        let (a_desc, b_desc, scale_d, scale_a, scale_b, trans) = match (ty, &rest[..]) {
            (_, &[a, b, d, sa, sb]) if k_major_only => (a, b, d, sa, sb, None),
            (Operand::Bf16 | Operand::F16, &[a, b, d, sa, sb, ta, tb]) => (a, b, d, sa, sb, Some((ta, tb))),
            _ if k_major_only => {
                panic!("wgmma PTX: {args:?}: .tf32, .e4m3 and .e5m2 want a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b")
            }
            _ => panic!(
                "wgmma PTX: {args:?}: want a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b"
            ),
        };
        let scale_d = match predicates.iter().find(|(p, _)| *p == scale_d) {
            Some((_, Some(v))) => *v,
            Some((p, None)) => panic!("wgmma PTX: predicate {p:?} read before it is set"),
            None => value(scale_d, named) != 0,
        };
        let sign = |t: &str| match value(t, named) as i64 {
            1 => 1.0,
            -1 => -1.0,
            v => panic!("wgmma PTX: imm-scale {v}: must be 1 or -1"),
        };
        let flag = |t: &str| match value(t, named) {
            0 => false,
            1 => true,
            v => panic!("wgmma PTX: imm-trans {v}: must be 0 or 1"),
        };
        let sign = sign(scale_a) * sign(scale_b);
        let (a_mn_major, b_mn_major) = trans.map_or((false, false), |(ta, tb)| (flag(ta), flag(tb)));
        let (a_bits, b_bits) = (value(a_desc, named), value(b_desc, named));
        Mma {
            op: op.to_string(),
            n,
            ty,
            ty_b,
            list,
            a_bits,
            b_bits,
            a: Descriptor::decode(a_bits),
            b: Descriptor::decode(b_bits),
            a_mn_major,
            b_mn_major,
            scale_d,
            sign,
            a_regs,
        }
    }

    /// Applies the product to `acc`, this thread's accumulators (the operands read from shared
    /// memory now, checked loads).
    #[track_caller]
    pub(crate) fn apply(&self, acc: &mut [f32]) {
        let (a, b, ty, kk, bytes) = (self.a, self.b, self.ty, self.ty.k(), self.ty.bytes());
        let (a_mn_major, b_mn_major, sign) = (self.a_mn_major, self.b_mn_major, self.sign);
        // The accumulator layout of m64nNk16 f32 (PTX ISA, "Register Fragments and Shared Memory
        // Matrix Layouts", "Matrix D"): d[i] is (row 16 w + g + 8 ((i / 2) % 2), column
        // 8 (i / 4) + 2 q + i % 2).
        let t = crate::sim::device::thread_idx().0 as usize % 128;
        let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
        // `A` from registers (PTX ISA, "Register Fragments", matrix A of `m64nNk16`): register
        // `r` of lane `q` of the quad holds row `g + 8 (r % 2)`, columns `8 (r / 2) + 2 q` (low
        // half) and `+ 1` (high half).
        let from_registers = |regs: &[[u32; 4]; 4], h: usize, k: usize| {
            let bits = regs[(k % 8) / 2][2 * (k / 8) + h] >> (16 * (k % 2));
            let bits = (bits & 0xffff) as u16;
            match ty {
                Operand::Bf16 => f64::from(f32::from_bits(u32::from(bits) << 16)),
                Operand::F16 => f64::from(half::f16::from_bits(bits).to_f32()),
                _ => panic!("wgmma PTX: register A of {ty:?}: the simulator models 16-bit types"),
            }
        };
        // Up to 32 along `k` per instruction (`k32` of FP8; register `A` is 16-bit, `k16`).
        let rows: [[f64; 32]; 2] = core::array::from_fn(|h| {
            let r = 16 * w + g + 8 * h;
            core::array::from_fn(|k| {
                if k >= kk {
                    0.0
                } else if let Some(regs) = &self.a_regs {
                    from_registers(regs, h, k)
                } else {
                    element(a.address_of(r, k, a_mn_major, bytes), ty)
                }
            })
        });
        // Column `c` of `B`, read once (checked loads) for the two rows that use it: slots `i`
        // and `i + 2` of each group of four. Reading it again would repeat the same thread's
        // checks of the same words, and took half the simulator's time in `wgmma` kernels.
        let mut columns: Vec<Option<[f64; 32]>> = vec![None; self.n];
        for (i, &slot) in self.list.iter().enumerate() {
            let (h, c) = ((i / 2) % 2, 8 * (i / 4) + 2 * q + i % 2);
            let column = columns[c].get_or_insert_with(|| {
                core::array::from_fn(|k| match k < kk {
                    true => element(b.address_of(c, k, b_mn_major, bytes), self.ty_b),
                    false => 0.0,
                })
            });
            let dot: f64 = (0..kk).map(|k| rows[h][k] * column[k]).sum();
            let before = if self.scale_d { f64::from(acc[slot]) } else { 0.0 };
            acc[slot] = (before + sign * dot) as f32;
        }
    }

    /// The instruction and its operands' values, as the warpgroup's threads must all execute it.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} {{d{}..}}, a-desc {:#x}, b-desc {:#x}, scale-d {}, trans-a {}, trans-b {}",
            self.op,
            self.list.first().copied().unwrap_or(0),
            self.a_bits,
            self.b_bits,
            self.scale_d as u8,
            self.a_mn_major as u8,
            self.b_mn_major as u8
        )
    }

    /// The checks of the product's shared-memory operands when it is issued (by the warpgroup's
    /// first thread: the operands are the warpgroup's), and the record that the group it joins
    /// reads them. Every element is checked for bounds, for an ordinary store not fenced for the
    /// asynchronous proxy, and for a copy not known landed; and where a tensor copy wrote the
    /// tile, the descriptor must read it as written: the tensor element at operand element
    /// (`mn`, `k`) must be a fixed translation of (`mn`, `k`) (transposed for an MN-major
    /// operand).
    #[track_caller]
    pub(crate) fn check_operands(&self) {
        let (bytes, kk) = (self.ty.bytes(), self.ty.k());
        let base = device::shared_base() as usize;
        let operands = [
            ("A", self.a, self.a_bits, 64, self.a_mn_major),
            ("B", self.b, self.b_bits, self.n, self.b_mn_major),
        ];
        // An `A` from registers has no shared-memory side.
        let skip = usize::from(self.a_regs.is_some());
        for (name, d, bits, rows, mn_major) in operands.into_iter().skip(skip) {
            if d.swizzle != 1 || d.base_offset != 0 {
                device::fail(violation(
                    Rule::WgmmaDescriptor,
                    format!(
                        "operand {name}'s descriptor {bits:#x} has swizzle mode {} and base offset \
                         {}: the tiles gpukern's copies write are 128-byte swizzled from 1024-byte \
                         aligned atoms (mode 1, base offset 0), the only layout the simulator models",
                        d.swizzle, d.base_offset
                    ),
                ));
            }
            let mut origin: Option<(i64, i64)> = None;
            let elements: Vec<(usize, usize)> =
                (0..rows).flat_map(|mn| (0..kk).map(move |k| (mn, k))).collect();
            let addresses: Vec<usize> = elements
                .iter()
                .map(|&(mn, k)| base + d.address_of(mn, k, mn_major, bytes))
                .collect();
            let copied = device::wgmma_operand(&addresses, bytes);
            for ((&(mn, k), &address), copied) in elements.iter().zip(&addresses).zip(copied) {
                let Some((r, c)) = copied else {
                    continue;
                };
                let (r, c, mn, k) = (i64::from(r), i64::from(c), mn as i64, k as i64);
                let shift = if mn_major {
                    (r - k, c - mn)
                } else {
                    (r - mn, c - k)
                };
                let Some(o) = origin else {
                    origin = Some(shift);
                    continue;
                };
                if o != shift {
                    let expected = match mn_major {
                        true => (o.0 + k, o.1 + mn),
                        false => (o.0 + mn, o.1 + k),
                    };
                    device::fail(violation(
                        Rule::WgmmaDescriptor,
                        format!(
                            "operand {name}'s descriptor {bits:#x} (start byte {}, LBO {}, SBO \
                             {}, 128-byte swizzle{}) reads its element (mn {mn}, k {k}) from \
                             shared byte {}, which holds the tensor's element ({r}, {c}), not \
                             ({}, {}) as its first element's place implies: the descriptor \
                             does not read the tile the way the copy engine wrote it (its \
                             start, strides or swizzle)",
                            d.start,
                            d.lbo,
                            d.sbo,
                            if mn_major { ", MN-major" } else { "" },
                            address - base,
                            expected.0,
                            expected.1
                        ),
                    ));
                }
            }
        }
    }
}
