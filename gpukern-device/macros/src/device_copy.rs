//! `#[derive(DeviceCopy)]`: implements `gpukern_device::DeviceCopy` for a struct after checking,
//! at the struct's definition, what the trait's contract needs: `#[repr(C)]` or
//! `#[repr(transparent)]` (here, from the attributes), no generic parameters (here), every field
//! `DeviceCopy` (a bound per field, the error pointing at the field's type) and no padding (a
//! constant assertion that the struct's size is the sum of its fields').

use proc_macro::{Delimiter, TokenStream, TokenTree};

use crate::tokens::{split_commas, text};

/// The derive's expansion, or a message for `compile_error!`.
pub fn expand(item: TokenStream) -> Result<TokenStream, String> {
    let tokens: Vec<TokenTree> = item.into_iter().collect();
    let mut repr_ok = false;
    let mut pos = 0;
    // Attributes: `#` then `[..]`; `repr(C)` or `repr(transparent)` among them.
    while let (Some(TokenTree::Punct(p)), Some(TokenTree::Group(g))) = (tokens.get(pos), tokens.get(pos + 1))
    {
        if p.as_char() != '#' || g.delimiter() != Delimiter::Bracket {
            break;
        }
        repr_ok |= is_repr_c(g.stream());
        pos += 2;
    }
    let keyword = tokens[pos..].iter().find_map(|t| match t {
        TokenTree::Ident(i) if ["struct", "enum", "union"].contains(&i.to_string().as_str()) => {
            Some(i.to_string())
        }
        _ => None,
    });
    let at = match keyword.as_deref() {
        Some("struct") => tokens[pos..]
            .iter()
            .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "struct"))
            .map(|p| p + pos)
            .unwrap_or(pos),
        Some(other) => {
            return Err(format!(
                "#[derive(DeviceCopy)] goes on a struct, not an {other}: a kernel's data is a `#[repr(C)]` \
                 struct of plain numbers"
            ))
        }
        None => return Err("#[derive(DeviceCopy)] goes on a struct".into()),
    };
    let name = match tokens.get(at + 1) {
        Some(TokenTree::Ident(i)) => i.to_string(),
        _ => return Err("#[derive(DeviceCopy)]: expected the struct's name".into()),
    };
    if !repr_ok {
        return Err(format!(
            "#[derive(DeviceCopy)] {name}: add `#[repr(C)]` (or `#[repr(transparent)]`): Rust's own \
             layout may reorder the fields, and the device must see them where the host put them"
        ));
    }
    let fields = match tokens.get(at + 2) {
        Some(TokenTree::Punct(p)) if p.as_char() == '<' => {
            return Err(format!(
                "#[derive(DeviceCopy)] {name}: a generic struct is not supported; write the struct for \
                 the concrete types the kernel takes"
            ))
        }
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => field_types(g.stream(), true),
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => {
            field_types(g.stream(), false)
        }
        Some(TokenTree::Punct(p)) if p.as_char() == ';' => Vec::new(),
        _ => {
            return Err(format!(
            "#[derive(DeviceCopy)] {name}: expected the struct's fields (a `where` clause is not supported)"
        ))
        }
    };
    let mut out: TokenStream = format!(
        "// SAFETY: `{name}` is `#[repr(C)]` (checked by the derive), every field is `DeviceCopy`
         // (the bounds below) and it has no padding (the assertion below).
         #[automatically_derived]
         unsafe impl ::gpukern_device::DeviceCopy for {name} {{}}"
    )
    .parse()
    .map_err(|e| format!("#[derive(DeviceCopy)]: generated impl does not parse ({e})"))?;
    // `const _: () = { fn __fields() { __field::<T1>(); .. } assert!(size == sum, ..); };`, the
    // field types spliced in as written, so that an error points at the field.
    let mut checks = TokenStream::new();
    let mut sizes = String::from("0");
    for ty in &fields {
        checks.extend(parse("__field::<")?);
        checks.extend(ty.iter().cloned());
        checks.extend(parse(">();")?);
        sizes.push_str(&format!(" + ::core::mem::size_of::<{}>()", text(ty)));
    }
    let mut body = parse(
        "#[allow(dead_code)] fn __field<T: ::gpukern_device::DeviceCopy + ?Sized>() {} \
         #[allow(dead_code)] fn __fields()",
    )?;
    body.extend([TokenTree::Group(proc_macro::Group::new(Delimiter::Brace, checks))]);
    body.extend(parse(&format!(
        "assert!(::core::mem::size_of::<{name}>() == {sizes}, {msg:?});",
        msg = format!(
            "#[derive(DeviceCopy)] {name} has padding (its size is more than the sum of its fields'): \
             the padding bytes would be undefined on the device; order the fields from the largest \
             alignment down, or add explicit padding fields"
        )
    ))?);
    let mut block = parse("const _: () =")?;
    block.extend([TokenTree::Group(proc_macro::Group::new(Delimiter::Brace, body))]);
    block.extend(parse(";")?);
    out.extend(block);
    Ok(out)
}

/// Whether an attribute's tokens are `repr(..)` naming `C` or `transparent`.
fn is_repr_c(attr: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = attr.into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(repr), TokenTree::Group(args)] if repr.to_string() == "repr" => args
            .stream()
            .into_iter()
            .any(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "C" || i.to_string() == "transparent")),
        _ => false,
    }
}

/// The type of each field of a struct body (`{ a: T, .. }` when `named`, else `(T, ..)`), its
/// attributes and visibility skipped.
fn field_types(body: TokenStream, named: bool) -> Vec<Vec<TokenTree>> {
    split_commas(body)
        .into_iter()
        .map(|field| {
            let mut rest: &[TokenTree] = &field;
            while let [TokenTree::Punct(p), TokenTree::Group(_), tail @ ..] = rest {
                if p.as_char() != '#' {
                    break;
                }
                rest = tail;
            }
            if let [TokenTree::Ident(v), tail @ ..] = rest {
                if v.to_string() == "pub" {
                    rest = match tail {
                        [TokenTree::Group(g), t @ ..] if g.delimiter() == Delimiter::Parenthesis => t,
                        t => t,
                    };
                }
            }
            if named {
                if let Some(colon) = rest
                    .iter()
                    .position(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ':'))
                {
                    rest = &rest[colon + 1..];
                }
            }
            rest.to_vec()
        })
        .collect()
}

/// Tokens of generated text.
fn parse(source: &str) -> Result<TokenStream, String> {
    source
        .parse()
        .map_err(|e| format!("#[derive(DeviceCopy)]: generated code does not parse ({e}): {source}"))
}
