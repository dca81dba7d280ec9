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
//! Written on bare token trees (no `syn`), so the nested PTX build pulls in no dependency.

mod launcher;

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

mod print;

/// `gpukern_device::print!`'s expansion: `$crate; "format", args...` (see `print.rs`).
#[proc_macro]
pub fn print(input: TokenStream) -> TokenStream {
    print::expand(input)
}

/// Turns `pub unsafe fn name(args) { body }` into a PTX kernel on the GPU and a plain function on the host.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return compile_error("#[kernel] takes no arguments");
    }
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
    for (i, t) in tokens.iter().enumerate() {
        if i == fn_pos {
            gpu.extend([
                TokenTree::Ident(Ident::new("extern", Span::call_site())),
                TokenTree::Literal(Literal::string("ptx-kernel")),
            ]);
        }
        gpu.extend([t.clone()]);
    }

    let launcher = match launcher::launcher(&tokens, fn_pos) {
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
