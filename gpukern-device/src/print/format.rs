//! The simulator's C-format interpreter: what `vprintf` prints for a format and its promoted
//! arguments, written to match glibc's `printf` for the conversions [`crate::print!`] accepts.

use super::Arg;

/// Flags, width, precision and length of one conversion.
#[derive(Clone, Copy, Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    precision: Option<usize>,
    /// `h` = 1, `hh` = 2 (the value is narrowed, as C converts it back); others 0.
    narrow: u8,
}

/// The text C's `printf(format, args...)` prints, for arguments already promoted as
/// [`crate::print!`] promotes them. A conversion without an argument of its class (only possible
/// when this is called directly) prints as written in the format.
pub fn format(format: &str, args: &[Arg]) -> String {
    let b = format.as_bytes();
    let mut out = Vec::with_capacity(b.len() + 16 * args.len());
    let mut args = args.iter();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if b.get(i) == Some(&b'%') {
            out.push(b'%');
            i += 1;
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&c) = b.get(i) {
            match c {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        spec.width = digits(b, &mut i).unwrap_or(0);
        if b.get(i) == Some(&b'.') {
            i += 1;
            spec.precision = Some(digits(b, &mut i).unwrap_or(0));
        }
        while let Some(&c @ (b'h' | b'l')) = b.get(i) {
            if c == b'h' {
                spec.narrow += 1;
            }
            i += 1;
        }
        let Some(&conversion) = b.get(i) else {
            out.extend_from_slice(&b[start..]);
            break;
        };
        i += 1;
        match (conversion, args.next()) {
            (b'd' | b'i' | b'u' | b'x' | b'X' | b'o', Some(&Arg::Int32(v))) => integer(
                &mut out,
                spec,
                conversion,
                int32_value(v, spec.narrow, conversion),
            ),
            (b'd' | b'i' | b'u' | b'x' | b'X' | b'o', Some(&Arg::Int64(v))) => {
                let value = match conversion {
                    b'd' | b'i' => Int::Signed(v as i64),
                    _ => Int::Unsigned(v),
                };
                integer(&mut out, spec, conversion, value)
            }
            (b'c', Some(&Arg::Int32(v))) => pad(&mut out, spec, b"", &[v as u8], false),
            (b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A', Some(&Arg::Double(v))) => {
                float(&mut out, spec, conversion, v)
            }
            (b'p', Some(&Arg::Pointer(v))) => {
                if v == 0 {
                    pad(&mut out, spec, b"", b"(nil)", false)
                } else {
                    pad(&mut out, spec, b"0x", format!("{v:x}").as_bytes(), false)
                }
            }
            _ => out.extend_from_slice(&b[start..i]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decimal number at `b[*i..]`, moving `i` past it.
fn digits(b: &[u8], i: &mut usize) -> Option<usize> {
    let start = *i;
    while b.get(*i).is_some_and(u8::is_ascii_digit) {
        *i += 1;
    }
    std::str::from_utf8(&b[start..*i]).ok()?.parse().ok()
}

/// An integer argument as its conversion reads it.
#[derive(Clone, Copy)]
enum Int {
    Signed(i64),
    Unsigned(u64),
}

/// A 32-bit argument read by `conversion`, narrowed by `h` (16 bits) or `hh` (8 bits).
fn int32_value(v: u32, narrow: u8, conversion: u8) -> Int {
    let signed = matches!(conversion, b'd' | b'i');
    match (narrow, signed) {
        (0, true) => Int::Signed(i64::from(v as i32)),
        (0, false) => Int::Unsigned(u64::from(v)),
        (1, true) => Int::Signed(i64::from(v as i16)),
        (1, false) => Int::Unsigned(u64::from(v as u16)),
        (_, true) => Int::Signed(i64::from(v as i8)),
        (_, false) => Int::Unsigned(u64::from(v as u8)),
    }
}

/// `%d %i %u %x %X %o`: precision is the least number of digits (0 prints nothing for 0), `#`
/// adds `0x` to a nonzero hex value and a leading `0` to octal, `0` pads after the sign unless a
/// precision is given.
fn integer(out: &mut Vec<u8>, spec: Spec, conversion: u8, value: Int) {
    let (negative, magnitude) = match value {
        Int::Signed(v) => (v < 0, v.unsigned_abs()),
        Int::Unsigned(v) => (false, v),
    };
    let mut digits = match conversion {
        b'x' => format!("{magnitude:x}"),
        b'X' => format!("{magnitude:X}"),
        b'o' => format!("{magnitude:o}"),
        _ => magnitude.to_string(),
    };
    if let Some(p) = spec.precision {
        if p == 0 && magnitude == 0 {
            digits.clear();
        } else if digits.len() < p {
            digits.insert_str(0, &"0".repeat(p - digits.len()));
        }
    }
    if spec.alt && conversion == b'o' && !digits.starts_with('0') {
        digits.insert(0, '0');
    }
    let mut prefix: Vec<u8> = Vec::new();
    if matches!(value, Int::Signed(_)) {
        prefix.extend_from_slice(sign(negative, spec));
    }
    if spec.alt && magnitude != 0 {
        match conversion {
            b'x' => prefix.extend_from_slice(b"0x"),
            b'X' => prefix.extend_from_slice(b"0X"),
            _ => {}
        }
    }
    let zero = spec.zero && spec.precision.is_none();
    pad(out, spec, &prefix, digits.as_bytes(), zero)
}

/// The sign a number prints: `-`, or `+` / ` ` by the flags, or nothing.
fn sign(negative: bool, spec: Spec) -> &'static [u8] {
    if negative {
        b"-"
    } else if spec.plus {
        b"+"
    } else if spec.space {
        b" "
    } else {
        b""
    }
}

/// Writes `prefix` (sign, `0x`) and `body` padded to the width: spaces on the right with `-`,
/// else zeros between prefix and body when `zero`, else spaces on the left.
fn pad(out: &mut Vec<u8>, spec: Spec, prefix: &[u8], body: &[u8], zero: bool) {
    let fill = spec.width.saturating_sub(prefix.len() + body.len());
    if spec.left {
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
        out.resize(out.len() + fill, b' ');
    } else if zero {
        out.extend_from_slice(prefix);
        out.resize(out.len() + fill, b'0');
        out.extend_from_slice(body);
    } else {
        out.resize(out.len() + fill, b' ');
        out.extend_from_slice(prefix);
        out.extend_from_slice(body);
    }
}

/// `%f %e %g %a` and their upper-case forms (precision 6 by default; `%a` exact by default).
fn float(out: &mut Vec<u8>, spec: Spec, conversion: u8, v: f64) {
    let upper = conversion.is_ascii_uppercase();
    let negative = v.is_sign_negative();
    let mut prefix = sign(negative, spec).to_vec();
    if !v.is_finite() {
        let text = match (v.is_nan(), upper) {
            (true, false) => "nan",
            (true, true) => "NAN",
            (false, false) => "inf",
            (false, true) => "INF",
        };
        return pad(out, spec, &prefix, text.as_bytes(), false);
    }
    let a = v.abs();
    let precision = spec.precision.unwrap_or(6);
    let body = match conversion.to_ascii_lowercase() {
        b'f' => fixed(a, precision, spec.alt),
        b'e' => scientific(a, precision, spec.alt),
        b'g' => general(a, precision, spec.alt),
        _ => {
            prefix.extend_from_slice(if upper { b"0X" } else { b"0x" });
            hex_float(a, spec.precision, spec.alt)
        }
    };
    let body = if upper { body.to_ascii_uppercase() } else { body };
    pad(out, spec, &prefix, body.as_bytes(), spec.zero)
}

/// `%f` of a non-negative finite `a`: Rust rounds the exact binary value to nearest, ties to
/// even, as glibc does in the default rounding mode.
fn fixed(a: f64, precision: usize, alt: bool) -> String {
    let mut s = format!("{a:.precision$}");
    if alt && precision == 0 {
        s.push('.');
    }
    s
}

/// `%e` of a non-negative finite `a`: `d.ddde+XX`, at least two exponent digits.
fn scientific(a: f64, precision: usize, alt: bool) -> String {
    let (mantissa, exponent) = split_exponent(a, precision);
    let point = if alt && precision == 0 { "." } else { "" };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}{point}e{sign}{:02}", exponent.unsigned_abs())
}

/// Rust's `{:.p$e}` of `a` as (mantissa text, decimal exponent).
fn split_exponent(a: f64, precision: usize) -> (String, i32) {
    let s = format!("{a:.precision$e}");
    match s.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse().unwrap_or(0)),
        None => (s, 0),
    }
}

/// `%g`: `%e` or `%f` by the exponent after rounding to `precision` significant digits, then
/// trailing zeros removed unless `#`. (glibc prints `%#g` of values that round to 1e6 as
/// `1.e+06`; C says `1.00000e+06`, which this prints.)
fn general(a: f64, precision: usize, alt: bool) -> String {
    let p = precision.max(1);
    let (_, x) = split_exponent(a, p - 1);
    let mut s = if x < -4 || x >= p as i32 {
        scientific(a, p - 1, alt)
    } else {
        fixed(a, (p as i32 - 1 - x) as usize, alt)
    };
    if !alt {
        let (number, exponent) = match s.find('e') {
            Some(at) => s.split_at(at),
            None => (s.as_str(), ""),
        };
        let number = if number.contains('.') {
            number.trim_end_matches('0').trim_end_matches('.')
        } else {
            number
        };
        s = format!("{number}{exponent}");
    }
    s
}

/// `%a` without its `0x` prefix: `h.hhhp+d` with a leading 1 (0 for zero and subnormals, as
/// glibc prints them), the exact mantissa by default, or rounded to nearest, ties to even, to
/// `precision` hex digits (a carry makes the leading digit 2, as in glibc).
fn hex_float(a: f64, precision: Option<usize>, alt: bool) -> String {
    let bits = a.to_bits();
    let biased = (bits >> 52) as i32;
    let mut mantissa = bits & ((1 << 52) - 1);
    let (mut lead, exponent) = match (biased, mantissa) {
        (0, 0) => (0u64, 0),
        (0, _) => (0, -1022),
        _ => (1, biased - 1023),
    };
    let digits = match precision {
        None => {
            let mut d = 13;
            while d > 0 && mantissa & 0xf == 0 {
                mantissa >>= 4;
                d -= 1;
            }
            d
        }
        Some(p) if p < 13 => {
            let dropped = 4 * (13 - p) as u32;
            let half = 1u64 << (dropped - 1);
            let rest = mantissa & ((1u64 << dropped) - 1);
            mantissa >>= dropped;
            // A tie goes to the even last digit kept: the leading digit's when none follow it.
            let odd = if p == 0 { lead & 1 == 1 } else { mantissa & 1 == 1 };
            if rest > half || (rest == half && odd) {
                mantissa += 1;
                if mantissa >> (4 * p) != 0 {
                    mantissa &= (1u64 << (4 * p)) - 1;
                    lead += 1;
                }
            }
            p
        }
        Some(p) => {
            let s = format!("{lead}.{mantissa:013x}{}", "0".repeat(p - 13));
            return format!("{s}p{exponent:+}");
        }
    };
    let fraction = if digits == 0 {
        String::new()
    } else {
        format!("{mantissa:0digits$x}")
    };
    let point = if digits > 0 || alt { "." } else { "" };
    format!("{lead}{point}{fraction}p{exponent:+}")
}
