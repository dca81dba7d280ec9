//! `#[len(expr)]` on a kernel's pointer parameter: how many elements the kernel may touch
//! through it, an expression of the kernel's scalar parameters (`#[len(n)] x: *mut f32`,
//! `#[len(rows * cols)] m: *const f32`). The launcher evaluates it for each launch, refuses a
//! shorter buffer, and in the simulator registers exactly that many elements; a kernel that
//! declares it for every pointer parameter gets a safe launcher.
//!
//! The attribute exists only for the macro: it is read from the parameter list (`declared`) and
//! removed from the function the macro emits (`strip`), where rustc would refuse it.

use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

use crate::tokens::{split_commas, text};

/// The expression of a parameter's `#[len(..)]` among its leading attributes, if any; `Err` for
/// an empty one.
pub fn declared(attributes: &[TokenTree], param: &str) -> Result<Option<String>, String> {
    let mut found = None;
    for pair in attributes.chunks(2) {
        if let [TokenTree::Punct(_), TokenTree::Group(g)] = pair {
            if let Some(expr) = len_expr(g) {
                if expr.is_empty() {
                    return Err(format!(
                        "#[len()] on `{param}`: give the number of elements, e.g. `#[len(n)]`"
                    ));
                }
                found = Some(text(&expr));
            }
        }
    }
    Ok(found)
}

/// The tokens inside `len(..)` when the attribute group `[..]` is one.
fn len_expr(attribute: &Group) -> Option<Vec<TokenTree>> {
    let tokens: Vec<TokenTree> = attribute.stream().into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(i), TokenTree::Group(args)]
            if i.to_string() == "len" && args.delimiter() == Delimiter::Parenthesis =>
        {
            Some(args.stream().into_iter().collect())
        }
        _ => None,
    }
}

/// The parameter list without its `#[len(..)]` attributes (other attributes stay).
pub fn strip(params: &Group) -> Group {
    let mut out = TokenStream::new();
    for (i, param) in split_commas(params.stream()).into_iter().enumerate() {
        if i > 0 {
            out.extend(",".parse::<TokenStream>().unwrap_or_default());
        }
        let mut rest: &[TokenTree] = &param;
        while let [TokenTree::Punct(p), TokenTree::Group(g), tail @ ..] = rest {
            if p.as_char() != '#' {
                break;
            }
            if len_expr(g).is_none() {
                out.extend([rest[0].clone(), rest[1].clone()]);
            }
            rest = tail;
        }
        out.extend(rest.iter().cloned());
    }
    let mut group = Group::new(params.delimiter(), out);
    group.set_span(params.span());
    group
}
