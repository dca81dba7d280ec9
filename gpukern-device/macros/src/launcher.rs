//! The host launcher `#[kernel]` emits next to each kernel: a module named after the kernel
//! holding its `KERNEL` description and a typed `launch` function (see `gpukern_device::launch`).
//!
//! The signature is read from bare tokens: `name(p: *const T, q: *mut U, s: S, ...)`. A type
//! that came through a `macro_rules!` fragment (`$t:ty`) arrives wrapped in an invisible group,
//! which is looked through.

use proc_macro::{Delimiter, TokenStream, TokenTree};

use crate::bounds::Bounds;

/// How one kernel parameter is passed from the host.
enum Kind {
    Input,
    Output,
    Scalar,
}

/// One kernel parameter: its name, how it is passed, and the type of its elements (pointers) or
/// its own type (scalars), as source text.
struct Param {
    name: String,
    kind: Kind,
    ty: String,
    written: String,
}

/// The launcher module for the kernel whose tokens are `tokens`, `fn_pos` being the index of its
/// `fn` keyword, and its launch bounds if it has any; `Err` carries a message for `compile_error!`.
pub fn launcher(tokens: &[TokenTree], fn_pos: usize, bounds: Option<Bounds>) -> Result<TokenStream, String> {
    let name = match tokens.get(fn_pos + 1) {
        Some(TokenTree::Ident(i)) => i.to_string(),
        _ => return Err("#[kernel]: expected the function's name after `fn`".into()),
    };
    let params = match tokens.get(fn_pos + 2) {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => g.stream(),
        Some(TokenTree::Punct(p)) if p.as_char() == '<' => {
            return Err(format!(
                "#[kernel] {name}: a kernel cannot be generic (a PTX entry point has one signature); \
                 write one #[kernel] per instantiation that calls a generic function"
            ))
        }
        _ => return Err(format!("#[kernel] {name}: expected the parameter list")),
    };
    let params = split_params(params)
        .into_iter()
        .enumerate()
        .map(|(i, p)| parse_param(&name, i, p))
        .collect::<Result<Vec<_>, _>>()?;
    render(&name, &params, bounds)
        .parse()
        .map_err(|e| format!("#[kernel] {name}: generated launcher does not parse: {e}"))
}

/// The parameters' token lists, split at the commas outside angle brackets.
fn split_params(stream: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut params = vec![Vec::new()];
    let mut depth = 0i32;
    let mut prev_dash = false;
    for t in stream {
        if let TokenTree::Punct(p) = &t {
            match p.as_char() {
                '<' => depth += 1,
                // `->` in a function-pointer type is not a closing bracket.
                '>' if !prev_dash => depth -= 1,
                ',' if depth == 0 => {
                    params.push(Vec::new());
                    prev_dash = false;
                    continue;
                }
                _ => {}
            }
            prev_dash = p.as_char() == '-';
        } else {
            prev_dash = false;
        }
        if let Some(last) = params.last_mut() {
            last.push(t);
        }
    }
    params.retain(|p| !p.is_empty());
    params
}

/// Tokens with invisible (`macro_rules!` fragment) groups opened, at the top level.
fn flatten(tokens: Vec<TokenTree>) -> Vec<TokenTree> {
    let mut out = Vec::new();
    for t in tokens {
        match t {
            TokenTree::Group(g) if g.delimiter() == Delimiter::None => {
                out.extend(flatten(g.stream().into_iter().collect()))
            }
            t => out.push(t),
        }
    }
    out
}

/// Source text of tokens (spacing as `TokenStream`'s `Display` gives it).
fn text(tokens: &[TokenTree]) -> String {
    tokens.iter().cloned().collect::<TokenStream>().to_string()
}

fn parse_param(kernel: &str, index: usize, tokens: Vec<TokenTree>) -> Result<Param, String> {
    let tokens = flatten(tokens);
    // Attributes on parameters (`#[allow(..)] x: T`) are skipped.
    let mut rest: &[TokenTree] = &tokens;
    while let [TokenTree::Punct(p), TokenTree::Group(_), tail @ ..] = rest {
        if p.as_char() != '#' {
            break;
        }
        rest = tail;
    }
    let colon = rest
        .iter()
        .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ':'))
        .ok_or_else(|| format!("#[kernel] {kernel}: parameter {} has no type", index + 1))?;
    let pattern = &rest[..colon];
    let name = match pattern {
        [TokenTree::Ident(i)] | [TokenTree::Ident(_), TokenTree::Ident(i)] if i.to_string() != "_" => {
            i.to_string()
        }
        _ => format!("arg{index}"),
    };
    let ty = flatten(rest[colon + 1..].to_vec());
    let written = text(&ty);
    let pointer = match ty.as_slice() {
        [TokenTree::Punct(star), TokenTree::Ident(m), elem @ ..] if star.as_char() == '*' => {
            match m.to_string().as_str() {
                "const" => Some((Kind::Input, text(elem))),
                "mut" => Some((Kind::Output, text(elem))),
                _ => None,
            }
        }
        _ => None,
    };
    let (kind, ty) = pointer.unwrap_or((Kind::Scalar, written.clone()));
    Ok(Param {
        name,
        kind,
        ty,
        written,
    })
}

/// The launcher module's source.
fn render(kernel: &str, params: &[Param], bounds: Option<Bounds>) -> String {
    let (max_threads, min_blocks, launch_bounds) = match bounds {
        Some(b) => (
            format!("Some({})", b.max_threads),
            format!("Some({})", b.min_blocks),
            format!(
                "Some(::gpukern_device::launch::LaunchBounds {{ max_threads: {}, min_blocks: {} }})",
                b.max_threads, b.min_blocks
            ),
        ),
        None => ("None".to_string(), "None".to_string(), "None".to_string()),
    };
    let describe = params
        .iter()
        .map(|p| {
            let kind = match p.kind {
                Kind::Input => "Input",
                Kind::Output => "Output",
                Kind::Scalar => "Scalar",
            };
            format!(
                "::gpukern_device::launch::Param {{ name: {:?}, kind: ::gpukern_device::launch::ParamKind::{kind}, ty: {:?} }}",
                p.name, p.written
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let signature = params
        .iter()
        .map(|p| match p.kind {
            Kind::Input => format!("{}: &'__a __L::Buffer<{}>", p.name, p.ty),
            Kind::Output => format!("{}: &'__a mut __L::Buffer<{}>", p.name, p.ty),
            Kind::Scalar => format!("{}: {}", p.name, p.ty),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let gather = params
        .iter()
        .map(|p| match p.kind {
            Kind::Input => format!("let {0} = __L::input(&mut __args, {0});", p.name),
            Kind::Output => format!("let {0} = __L::output(&mut __args, {0});", p.name),
            Kind::Scalar => format!("__L::scalar(&mut __args, {});", p.name),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let call_args = params
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let host_args = params
        .iter()
        .map(|p| match p.kind {
            Kind::Input => format!("`{}: &DeviceVec<{}>`", p.name, p.ty),
            Kind::Output => format!("`{}: &mut DeviceVec<{}>`", p.name, p.ty),
            Kind::Scalar => format!("`{}: {}`", p.name, p.ty),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
#[cfg(not(target_arch = "nvptx64"))]
#[doc = "The host's launcher of the kernel [`{kernel}`](fn@{kernel}), generated by `#[kernel]`."]
#[allow(non_snake_case, unused_imports)]
pub mod {kernel} {{
    use super::*;

    /// The kernel's entry point, crate and parameters.
    pub static KERNEL: ::gpukern_device::launch::Kernel = ::gpukern_device::launch::Kernel {{
        name: {kernel:?},
        krate: ::core::env!("CARGO_CRATE_NAME"),
        params: &[{describe}],
        bounds: {launch_bounds},
        launches: ::gpukern_device::launch::LaunchCounts::new(),
    }};

    /// Most threads per block the kernel may be launched with (`.maxntid` in its PTX), from
    /// `#[kernel(launch_bounds(..))]`; `None` without launch bounds.
    pub const MAX_THREADS: ::core::option::Option<u32> = {max_threads};

    /// Blocks of [`MAX_THREADS`] threads that must fit on one multiprocessor at once
    /// (`.minnctapersm`, which caps the registers per thread), from
    /// `#[kernel(launch_bounds(..))]`; `None` without launch bounds.
    pub const MIN_BLOCKS: ::core::option::Option<u32> = {min_blocks};

    /// Launches the kernel on `on` (gpukern's `Module`: a CUDA device or the simulator) with
    /// `config`; the arguments are the host's counterparts of the kernel's ({host_args}).
    ///
    /// # Safety
    /// The kernel's own contract: the buffers hold every element it touches for these arguments
    /// and this launch shape.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch<'__a, __L: ::gpukern_device::launch::Launcher>(
        on: &'__a __L,
        config: __L::Config,
        {signature}
    ) -> ::core::result::Result<(), __L::Error> {{
        let mut __args = on.begin(&KERNEL, config);
        {gather}
        // SAFETY: the caller upholds the kernel's contract; the simulator calls this with the
        // pointers it registered above.
        unsafe {{ __L::launch(__args, &|| unsafe {{ super::{kernel}({call_args}) }}) }}
    }}
}}
"#
    )
}
