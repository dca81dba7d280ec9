//! `#[kernel]`: marks a function of a kernel crate as a GPU entry point.
//!
//! On `nvptx64` the function becomes `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn`, an
//! entry point of the PTX module under its own name. On any other target it stays a plain
//! `pub unsafe fn`, which the CPU simulator calls once per simulated thread, and gets a sibling
//! module of the same name with its typed host launcher (`launcher`).
//!
//! A `#[kernel]` goes on a function at module level (not inside a function body, where the
//! launcher module could not name it), `pub unsafe fn`, not generic, every parameter a raw
//! pointer or a `Scalar` (an integer, a float, `bool`).
//!
//! `#[kernel(launch_bounds(MAX_THREADS, MIN_BLOCKS))]` gives the entry CUDA's launch bounds
//! (`.maxntid`, `.minnctapersm`; see `bounds`).
//!
//! Written on bare token trees (no `syn`), so the nested PTX build pulls in no dependency.

mod bounds;
mod launcher;

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

mod print;

/// `gpukern_device::print!`'s expansion: `$crate; "format", args...` (see `print.rs`).
#[proc_macro]
pub fn print(input: TokenStream) -> TokenStream {
    print::expand(input)
}

/// Turns `pub unsafe fn name(args) { body }` into a PTX kernel on the GPU and a plain function on the host.
///
/// `#[kernel(launch_bounds(384, 1))]` (the second number optional, 1 if left out) also gives the
/// entry CUDA's `__launch_bounds__(384, 1)`: at most 384 threads per block, registers capped so
/// that one such block fits on a multiprocessor.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let bounds = match bounds::parse(&attr.to_string()) {
        Ok(bounds) => bounds,
        Err(msg) => return compile_error(&msg),
    };
    let tokens: Vec<TokenTree> = item.into_iter().collect();
    let Some(fn_pos) = tokens
        .iter()
        .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "fn"))
    else {
        return compile_error("#[kernel] goes on a function");
    };
    let is_unsafe =
        fn_pos > 0 && matches!(&tokens[fn_pos - 1], TokenTree::Ident(i) if i.to_string() == "unsafe");
    if !is_unsafe {
        return compile_error("a #[kernel] must be `pub unsafe fn`: it receives raw device pointers");
    }

    let mut gpu = TokenStream::new();
    gpu.extend(attribute("cfg(target_arch = \"nvptx64\")"));
    gpu.extend(attribute("unsafe(no_mangle)"));
    let last = tokens.len().saturating_sub(1);
    for (i, t) in tokens.iter().enumerate() {
        if i == fn_pos {
            gpu.extend([
                TokenTree::Ident(Ident::new("extern", Span::call_site())),
                TokenTree::Literal(Literal::string("ptx-kernel")),
            ]);
        }
        match (t, bounds, tokens.get(fn_pos + 1)) {
            (TokenTree::Group(body), Some(bounds), Some(TokenTree::Ident(name)))
                if i == last && body.delimiter() == Delimiter::Brace =>
            {
                gpu.extend([marked_body(body, &bounds.marker(&name.to_string()))])
            }
            _ => gpu.extend([t.clone()]),
        }
    }

    let launcher = match launcher::launcher(&tokens, fn_pos, bounds) {
        Ok(launcher) => launcher,
        Err(msg) => return compile_error(&msg),
    };
    let mut host = TokenStream::new();
    host.extend(attribute("cfg(not(target_arch = \"nvptx64\"))"));
    host.extend(tokens);
    host.extend(launcher);

    let mut out = gpu;
    out.extend(host);
    out
}

/// `{ <marker static> { body } }`: the body with the launch-bounds marker declared in front of
/// it, inside the function, so that the marker is in the PTX exactly when the entry is.
fn marked_body(body: &Group, marker: &str) -> TokenTree {
    let mut inner: TokenStream =
        format!("#[used] #[unsafe(no_mangle)] #[allow(non_upper_case_globals)] static {marker}: u8 = 0;")
            .parse()
            .expect("the marker static is valid Rust");
    inner.extend([TokenTree::Group(body.clone())]);
    let mut group = Group::new(Delimiter::Brace, inner);
    group.set_span(body.span());
    TokenTree::Group(group)
}

/// `#[text]` as tokens.
fn attribute(text: &str) -> TokenStream {
    let inner: TokenStream = text.parse().expect("attribute text is valid Rust");
    [
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, inner)),
    ]
    .into_iter()
    .collect()
}

/// A `compile_error!` carrying `msg`.
fn compile_error(msg: &str) -> TokenStream {
    format!("compile_error!({msg:?});").parse().expect("valid tokens")
}
