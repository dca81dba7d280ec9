//! `print!`: CUDA's device `printf`, checked at compile time.
//!
//! The macro reads the format literal, finds its conversions, and for each argument emits a call
//! of the argument trait of that conversion's class (`gpukern_device::print::{Int32, Int64,
//! Double, Pointer}`): an argument of the wrong type is a trait error that names the conversion
//! class, and a wrong number of arguments is a `compile_error!` on the format. Then:
//! * on `nvptx64`, a `#[repr(C)]` struct of the promoted arguments (so each is aligned to its
//!   size, as C lays out a `va_list` buffer) and a call of PTX's `vprintf` system call with the
//!   NUL-terminated format;
//! * elsewhere, a call of the simulator's formatter with the same promoted arguments.
//!
//! Invoked through `gpukern_device::print!`, a `macro_rules!` that passes its `$crate` first
//! (`$crate; "format", args...`), so the expansion names gpukern-device however the kernel crate
//! reaches it (`kernels_gpu::gpu`, for one).

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

/// What one conversion of a format takes, after C's default argument promotions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// `%d %i %u %x %X %o %c` (and `h`/`hh` of the integer ones): a 32-bit int.
    Int32,
    /// `%ld %lld %lu %llu %lx %llx %lo ...`: a 64-bit int.
    Int64,
    /// `%f %F %e %E %g %G %a %A` (and `%lf`...): a double (a `float` is promoted).
    Double,
    /// `%p`: a 64-bit pointer.
    Pointer,
}

impl Class {
    /// The argument trait in `gpukern_device::print` and the `Arg` variant it feeds.
    fn name(self) -> &'static str {
        match self {
            Class::Int32 => "Int32",
            Class::Int64 => "Int64",
            Class::Double => "Double",
            Class::Pointer => "Pointer",
        }
    }

    /// The type the argument is promoted to, a field of the `vprintf` buffer.
    fn promoted(self) -> &'static str {
        match self {
            Class::Int32 => "u32",
            Class::Int64 | Class::Pointer => "u64",
            Class::Double => "f64",
        }
    }
}

/// The classes of the conversions of `format`, in order, or why the format is refused.
pub(crate) fn conversions(format: &str) -> Result<Vec<Class>, String> {
    let b = format.as_bytes();
    let mut classes = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if b.get(i) == Some(&b'%') {
            i += 1;
            continue;
        }
        while matches!(b.get(i), Some(b'-' | b'+' | b' ' | b'#' | b'0')) {
            i += 1;
        }
        if b.get(i) == Some(&b'*') {
            return Err(format!(
                "print!: `*` width in `{}` is not supported: write the width into the format",
                text(b, start, i + 1)
            ));
        }
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if b.get(i) == Some(&b'*') {
                return Err(format!(
                    "print!: `*` precision in `{}` is not supported: write the precision into the format",
                    text(b, start, i + 1)
                ));
            }
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        let length_start = i;
        while matches!(b.get(i), Some(b'h' | b'l' | b'L' | b'z' | b'j' | b't' | b'q')) {
            i += 1;
        }
        let length = &b[length_start..i];
        let Some(&conversion) = b.get(i) else {
            return Err(format!(
                "print!: the format ends inside the conversion `{}`",
                text(b, start, i)
            ));
        };
        i += 1;
        let spec = text(b, start, i);
        let class = match (length, conversion) {
            (b"" | b"h" | b"hh", b'd' | b'i' | b'u' | b'x' | b'X' | b'o') => Class::Int32,
            (b"", b'c') => Class::Int32,
            (b"l" | b"ll", b'd' | b'i' | b'u' | b'x' | b'X' | b'o') => Class::Int64,
            (b"" | b"l", b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A') => Class::Double,
            (b"", b'p') => Class::Pointer,
            (_, b's') => {
                return Err(format!(
                    "print!: `{spec}` is not supported: a device string would be a pointer to \
                     NUL-terminated bytes in device memory, which gpukern kernels do not have; \
                     put the text in the format, or print bytes with `%c`"
                ))
            }
            (_, b'n') => {
                return Err(format!(
                    "print!: `{spec}` is not supported: it writes through a pointer"
                ))
            }
            (_, b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'f' | b'F' | b'e' | b'E' | b'g')
            | (_, b'G' | b'a' | b'A' | b'c' | b'p') => {
                return Err(format!(
                    "print!: the length modifier of `{spec}` is not supported: use none (32-bit \
                     ints, doubles, pointers) or `l`/`ll` (64-bit ints)"
                ))
            }
            _ => {
                return Err(format!(
                    "print!: `{spec}` is not a supported conversion (supported: %d %i %u %x %X %o \
                     %c, %ld %lu %lx %lo (and ll), %f %e %g %a (and upper case), %p, %%)"
                ))
            }
        };
        classes.push(class);
    }
    Ok(classes)
}

/// `b[start..end]` as text, for messages.
fn text(b: &[u8], start: usize, end: usize) -> String {
    String::from_utf8_lossy(&b[start..end.min(b.len())]).into_owned()
}

/// The value of a Rust string literal's source text (`"..."`, `r"..."`, `r#"..."#`), or why it
/// is not one.
pub(crate) fn string_value(source: &str) -> Result<String, String> {
    if let Some(raw) = source.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        let body = &raw[hashes..];
        return body
            .strip_prefix('"')
            .and_then(|b| b.strip_suffix(&"#".repeat(hashes)))
            .and_then(|b| b.strip_suffix('"'))
            .map(str::to_string)
            .ok_or_else(|| "print!: the format must be a string literal".to_string());
    }
    let Some(body) = source.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return Err("print!: the format must be a string literal (not a byte, C or raw byte string)".into());
    };
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            Some('0') => out.push('\0'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let v = u8::from_str_radix(&hex, 16).map_err(|_| "print!: bad `\\x` escape")?;
                out.push(char::from(v));
            }
            Some('u') => {
                let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                let v = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                out.push(v.ok_or("print!: bad `\\u{...}` escape")?);
            }
            Some('\n') => {
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
            }
            _ => return Err("print!: unknown escape in the format".into()),
        }
    }
    Ok(out)
}

/// Expands `$crate; "format", args...` (see the module's doc).
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    let mut tokens = input.into_iter().peekable();
    let mut krate = TokenStream::new();
    for t in tokens.by_ref() {
        if matches!(&t, TokenTree::Punct(p) if p.as_char() == ';') {
            break;
        }
        krate.extend([t]);
    }
    let rest: Vec<TokenTree> = tokens.collect();
    let Some(TokenTree::Literal(literal)) = rest.first().map(unwrap_none_group) else {
        let span = rest.first().map_or_else(Span::call_site, TokenTree::span);
        return error_at(
            span,
            "print! needs a string literal as its format: print!(\"x = %d\\n\", x)",
        );
    };
    let span = literal.span();
    let format = match string_value(&literal.to_string()) {
        Ok(f) => f,
        Err(e) => return error_at(span, &e),
    };
    if format.contains('\0') {
        return error_at(
            span,
            "print!: the format contains a NUL, where vprintf would stop",
        );
    }
    let classes = match conversions(&format) {
        Ok(c) => c,
        Err(e) => return error_at(span, &e),
    };
    let args = match split_args(&rest[1..]) {
        Ok(a) => a,
        Err((span, e)) => return error_at(span, e),
    };
    if args.len() != classes.len() {
        return error_at(
            span,
            &format!(
                "print!: the format has {} conversion(s) but {} argument(s) were given",
                classes.len(),
                args.len()
            ),
        );
    }

    let mixed = Span::mixed_site();
    let local = |i: usize| TokenTree::Ident(Ident::new(&format!("__gk_print_{i}"), mixed));
    let path = |tail: &str| -> TokenStream {
        let mut p = krate.clone();
        p.extend(parse(&format!("::print::{tail}")));
        p
    };

    // `let __gk_print_i = $crate::print::Class::print_arg(arg);`: the type check and promotion.
    let mut body = TokenStream::new();
    for (i, (arg, class)) in args.into_iter().zip(&classes).enumerate() {
        body.extend(parse("let"));
        body.extend([local(i), punct('=')]);
        body.extend(path(&format!("{}::print_arg", class.name())));
        body.extend([group(Delimiter::Parenthesis, arg), punct(';')]);
    }

    // The GPU: `#[repr(C)] struct Args(u32, f64, ...)` and `vprintf(format, &args)`.
    let mut gpu = TokenStream::new();
    let mut bytes = format.into_bytes();
    bytes.push(0);
    let mut c_format = Literal::byte_string(&bytes);
    c_format.set_span(span);
    if classes.is_empty() {
        gpu.extend(parse("unsafe"));
        let mut call = path("__vprintf_no_args");
        call.extend([group(Delimiter::Parenthesis, TokenTree::Literal(c_format).into())]);
        gpu.extend([group(Delimiter::Brace, call)]);
    } else {
        let fields: Vec<String> = classes.iter().map(|c| c.promoted().to_string()).collect();
        gpu.extend(parse(&format!(
            "#[repr(C)] #[allow(dead_code)] struct __GkPrintArgs({});",
            fields.join(", ")
        )));
        let mut values = TokenStream::new();
        for i in 0..classes.len() {
            values.extend([local(i), punct(',')]);
        }
        gpu.extend(parse("let __gk_print_buffer = __GkPrintArgs"));
        gpu.extend([group(Delimiter::Parenthesis, values), punct(';')]);
        let mut call = path("__vprintf");
        let mut call_args: TokenStream = TokenTree::Literal(c_format).into();
        call_args.extend(parse(", &__gk_print_buffer"));
        call.extend([group(Delimiter::Parenthesis, call_args)]);
        gpu.extend(parse("unsafe"));
        gpu.extend([group(Delimiter::Brace, call)]);
    }

    // The simulator: `__sim_print("format", &[Arg::Int32(__gk_print_0), ...])`.
    let mut values = TokenStream::new();
    for (i, class) in classes.iter().enumerate() {
        values.extend(path(&format!("Arg::{}", class.name())));
        values.extend([group(Delimiter::Parenthesis, local(i).into()), punct(',')]);
    }
    let mut sim_args: TokenStream = TokenTree::Literal(literal.clone()).into();
    sim_args.extend([punct(',')]);
    sim_args.extend(parse("&"));
    sim_args.extend([group(Delimiter::Bracket, values)]);
    let mut sim = path("__sim_print");
    sim.extend([group(Delimiter::Parenthesis, sim_args), punct(';')]);

    body.extend(parse("#[cfg(target_arch = \"nvptx64\")]"));
    body.extend([group(Delimiter::Brace, gpu)]);
    body.extend(parse("#[cfg(not(target_arch = \"nvptx64\"))]"));
    body.extend([group(Delimiter::Brace, sim)]);
    TokenTree::Group(Group::new(Delimiter::Brace, body)).into()
}

/// The argument expressions after the format: `, a, b + 1, c` (a trailing comma allowed). Commas
/// inside brackets belong to their group; a turbofish with several parameters (`f::<A, B>()`)
/// must be put in parentheses.
fn split_args(tokens: &[TokenTree]) -> Result<Vec<TokenStream>, (Span, &'static str)> {
    let mut args = Vec::new();
    let mut iter = tokens.iter();
    match iter.next() {
        None => return Ok(args),
        Some(TokenTree::Punct(p)) if p.as_char() == ',' => {}
        Some(t) => return Err((t.span(), "print!: expected `,` after the format")),
    }
    let mut current = TokenStream::new();
    let mut empty = true;
    for t in iter {
        if matches!(t, TokenTree::Punct(p) if p.as_char() == ',') {
            if empty {
                return Err((t.span(), "print!: an argument is missing before this `,`"));
            }
            args.push(std::mem::take(&mut current));
            empty = true;
        } else {
            current.extend([t.clone()]);
            empty = false;
        }
    }
    if !empty {
        args.push(current);
    }
    Ok(args)
}

/// The one token inside an invisible group (how `macro_rules!` passes some fragments on, such
/// as an `$e:expr` holding a literal), else `t` itself.
fn unwrap_none_group(t: &TokenTree) -> TokenTree {
    if let TokenTree::Group(g) = t {
        let inner: Vec<TokenTree> = g.stream().into_iter().collect();
        if g.delimiter() == Delimiter::None && inner.len() == 1 {
            return unwrap_none_group(&inner[0]);
        }
    }
    t.clone()
}

fn parse(text: &str) -> TokenStream {
    text.parse().expect("the macro's own tokens are valid Rust")
}

fn punct(c: char) -> TokenTree {
    TokenTree::Punct(Punct::new(c, Spacing::Alone))
}

fn group(delimiter: Delimiter, inner: TokenStream) -> TokenTree {
    TokenTree::Group(Group::new(delimiter, inner))
}

/// `compile_error!(msg)` pointing at `span`.
fn error_at(span: Span, msg: &str) -> TokenStream {
    let tokens: TokenStream = format!("compile_error!({msg:?});").parse().expect("valid tokens");
    tokens
        .into_iter()
        .map(|mut t| {
            t.set_span(span);
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{conversions, string_value, Class::*};

    #[test]
    fn each_conversion_has_its_class() {
        assert_eq!(
            conversions("%d %i %u %x %X %o %c %hd %hhu").unwrap(),
            vec![Int32; 9]
        );
        assert_eq!(
            conversions("%ld %lld %lu %llu %lx %llX %lo %li").unwrap(),
            vec![Int64; 8]
        );
        assert_eq!(
            conversions("%f %F %e %E %g %G %a %A %lf %-+#012.4e").unwrap(),
            vec![Double; 10]
        );
        assert_eq!(conversions("%p %% 100%%").unwrap(), vec![Pointer]);
        assert_eq!(conversions("block %u: %5.2f\n").unwrap(), vec![Int32, Double]);
    }

    #[test]
    fn refused_formats_say_why() {
        assert!(conversions("%s").unwrap_err().contains("`%s` is not supported"));
        assert!(conversions("%n")
            .unwrap_err()
            .contains("writes through a pointer"));
        assert!(conversions("%*d").unwrap_err().contains("`*` width"));
        assert!(conversions("%.*f").unwrap_err().contains("`*` precision"));
        assert!(conversions("%Lf")
            .unwrap_err()
            .contains("length modifier of `%Lf`"));
        assert!(conversions("%zu")
            .unwrap_err()
            .contains("length modifier of `%zu`"));
        assert!(conversions("%lc").unwrap_err().contains("length modifier"));
        assert!(conversions("%y").unwrap_err().contains("`%y` is not a supported"));
        assert!(conversions("50%").unwrap_err().contains("ends inside"));
        assert!(conversions("%-5")
            .unwrap_err()
            .contains("ends inside the conversion `%-5`"));
    }

    #[test]
    fn string_literals_are_unescaped() {
        assert_eq!(
            string_value(r#""a\n\t\\\"%d\x41\u{e9}""#).unwrap(),
            "a\n\t\\\"%dA\u{e9}"
        );
        assert_eq!(string_value("\"a\\\n    b\"").unwrap(), "ab");
        assert_eq!(string_value(r####"r#"x "%d" y"#"####).unwrap(), "x \"%d\" y");
        assert_eq!(string_value(r#"r"\n""#).unwrap(), "\\n");
        assert!(string_value(r#"b"x""#).is_err());
        assert!(string_value("42").is_err());
    }
}
