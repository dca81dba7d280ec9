//! `#[kernel(..)]`'s arguments, each a name and a parenthesised list, in any order:
//!
//! * `launch_bounds(MAX_THREADS, MIN_BLOCKS)`: CUDA's `__launch_bounds__` (see `bounds`);
//! * `instances(A, B, ..)`: the instances of a generic kernel, each the generic arguments in
//!   order (one argument alone, several in parentheses: `(f32, 4)`), optionally named:
//!   `entry_name = (f32, 4)`; an unnamed one is called `<kernel>_<arguments>`;
//! * `block(EXPR)`: the most threads per block the host launches it with;
//! * `barriers(EXPR)`: how many block barriers its PTX entry holds;
//! * `shared(name: Type, ..)`: typed shared-memory items (`shared::Array`, `shared::Tile`, ..).
//!
//! `EXPR` is a constant expression in which a generic kernel's parameters stand for each
//! instance's arguments (`barriers(if E::LANES == 8 { 1 } else { 2 })`).

use proc_macro::{Delimiter, TokenStream, TokenTree};

use crate::bounds::{self, Bounds};
use crate::tokens::{split_commas, text};

/// One instance of a generic kernel: its entry's name (if given) and its generic arguments.
pub struct Instance {
    pub name: Option<String>,
    pub args: Vec<Vec<TokenTree>>,
}

/// One typed shared-memory item: its binding's name and its type.
pub struct SharedItem {
    pub name: String,
    pub ty: Vec<TokenTree>,
}

/// The parsed attribute.
#[derive(Default)]
pub struct KernelAttr {
    pub bounds: Option<Bounds>,
    pub instances: Option<Vec<Instance>>,
    pub block: Option<Vec<TokenTree>>,
    pub barriers: Option<Vec<TokenTree>>,
    pub shared: Vec<SharedItem>,
}

/// What `#[kernel]` accepts, for messages.
pub const USAGE: &str = "#[kernel] takes no arguments or any of `launch_bounds(MAX_THREADS[, MIN_BLOCKS])`, \
     `instances(..)`, `block(N)`, `barriers(N)`, `shared(name: Type, ..)`, e.g. \
     `#[kernel(instances(f32, bf16), block(256), barriers(1))]`";

/// Parses the attribute's tokens; `Err` carries a message for `compile_error!`.
pub fn parse(attr: TokenStream) -> Result<KernelAttr, String> {
    let mut out = KernelAttr::default();
    for item in split_commas(attr) {
        let (name, args) = match item.as_slice() {
            [TokenTree::Ident(name), TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => {
                (name.to_string(), g.stream())
            }
            _ => return Err(format!("{USAGE}; found `{}`", text(&item))),
        };
        let once = |present: bool| {
            if present {
                Err(format!("#[kernel]: `{name}(..)` given twice"))
            } else {
                Ok(())
            }
        };
        match name.as_str() {
            "launch_bounds" => {
                once(out.bounds.is_some())?;
                out.bounds = bounds::parse(&text(&item))?;
            }
            "instances" => {
                once(out.instances.is_some())?;
                out.instances = Some(instances(args)?);
            }
            "block" => {
                once(out.block.is_some())?;
                out.block = Some(expression(&name, args)?);
            }
            "barriers" => {
                once(out.barriers.is_some())?;
                out.barriers = Some(expression(&name, args)?);
            }
            "shared" => {
                once(!out.shared.is_empty())?;
                out.shared = shared(args)?;
            }
            _ => return Err(format!("{USAGE}; found `{}`", text(&item))),
        }
    }
    Ok(out)
}

/// A non-empty expression.
fn expression(name: &str, args: TokenStream) -> Result<Vec<TokenTree>, String> {
    let tokens: Vec<TokenTree> = args.into_iter().collect();
    if tokens.is_empty() {
        return Err(format!("#[kernel]: `{name}()` needs a value, e.g. `{name}(256)`"));
    }
    Ok(tokens)
}

/// `instances(..)`'s list.
fn instances(args: TokenStream) -> Result<Vec<Instance>, String> {
    let mut out = Vec::new();
    for item in split_commas(args) {
        let (name, rest) = match item.as_slice() {
            [TokenTree::Ident(name), TokenTree::Punct(eq), rest @ ..] if eq.as_char() == '=' => {
                (Some(name.to_string()), rest.to_vec())
            }
            _ => (None, item),
        };
        let args = match rest.as_slice() {
            [TokenTree::Group(g)] if g.delimiter() == Delimiter::Parenthesis => split_commas(g.stream()),
            [] => return Err("#[kernel(instances(..))]: an instance without arguments".into()),
            _ => vec![rest],
        };
        out.push(Instance { name, args });
    }
    if out.is_empty() {
        return Err("#[kernel(instances())]: name at least one instance, e.g. `instances(f32, bf16)`".into());
    }
    Ok(out)
}

/// `shared(..)`'s items, `name: Type` each.
fn shared(args: TokenStream) -> Result<Vec<SharedItem>, String> {
    split_commas(args)
        .into_iter()
        .map(|item| match item.as_slice() {
            [TokenTree::Ident(name), TokenTree::Punct(colon), ty @ ..] if colon.as_char() == ':' && !ty.is_empty() => {
                Ok(SharedItem {
                    name: name.to_string(),
                    ty: ty.to_vec(),
                })
            }
            _ => Err(format!(
                "#[kernel(shared(..))]: expected `name: Type` (e.g. `tile: Tile<f32, 32, 32, 1>`), found `{}`",
                text(&item)
            )),
        })
        .collect()
}
