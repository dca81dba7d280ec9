//! The parts of a kernel function the macro needs: its name, generic parameters, parameter list
//! and body, read from the item's tokens.

use proc_macro::{Delimiter, Group, TokenTree};

use crate::len;
use crate::tokens::{flatten, split_commas, text};

/// A generic parameter of a kernel: a type (`E: NormElem`) or a constant (`const V: usize`).
pub struct GenericParam {
    pub name: String,
    /// The constant's type, for a const parameter.
    pub const_ty: Option<Vec<TokenTree>>,
}

/// A kernel function, split into what the macro rewrites.
pub struct Signature {
    /// Every token of the item (attributes, visibility, `unsafe fn`, ..., body).
    pub tokens: Vec<TokenTree>,
    /// Index of the `fn` keyword.
    pub fn_pos: usize,
    pub name: String,
    pub generics: Vec<GenericParam>,
    /// The generic parameters as declared, bounds included (`E: NormElem, const V: usize`).
    pub generic_decl: Vec<TokenTree>,
    /// The `where` clause, if any (the tokens between the parameter list and the body).
    pub where_clause: Vec<TokenTree>,
    /// The parameter list as written, `#[len(..)]` attributes included: what the launcher reads.
    pub declared: Group,
    /// Index of the body's group (the last token).
    pub body_pos: usize,
}

impl Signature {
    /// The parameter list as written, with its `#[len(..)]` attributes.
    pub fn declared_params(&self) -> &Group {
        &self.declared
    }

    /// The body's group.
    pub fn body(&self) -> &Group {
        match &self.tokens[self.body_pos] {
            TokenTree::Group(g) => g,
            _ => unreachable!("body_pos is a group (checked in `parse`)"),
        }
    }

    /// Whether the kernel has generic parameters.
    pub fn is_generic(&self) -> bool {
        !self.generics.is_empty()
    }
}

/// Reads `tokens` as `.. unsafe fn name<generics>(params) [where ..] { body }`; `Err` carries a
/// message for `compile_error!`.
pub fn parse(mut tokens: Vec<TokenTree>) -> Result<Signature, String> {
    let fn_pos = tokens
        .iter()
        .position(|t| matches!(t, TokenTree::Ident(i) if i.to_string() == "fn"))
        .ok_or("#[kernel] goes on a function")?;
    let is_unsafe =
        fn_pos > 0 && matches!(&tokens[fn_pos - 1], TokenTree::Ident(i) if i.to_string() == "unsafe");
    if !is_unsafe {
        return Err("a #[kernel] must be `pub unsafe fn`: it receives raw device pointers".into());
    }
    let name = match tokens.get(fn_pos + 1) {
        Some(TokenTree::Ident(i)) => i.to_string(),
        _ => return Err("#[kernel]: expected the function's name after `fn`".into()),
    };
    // Generic parameters: what lies between `<` and its matching `>`.
    let mut pos = fn_pos + 2;
    let mut generic_tokens: Vec<TokenTree> = Vec::new();
    if matches!(tokens.get(pos), Some(TokenTree::Punct(p)) if p.as_char() == '<') {
        let start = pos + 1;
        let mut depth = 1i32;
        let mut prev_dash = false;
        pos += 1;
        while depth > 0 {
            let Some(t) = tokens.get(pos) else {
                return Err(format!("#[kernel] {name}: unclosed generic parameter list"));
            };
            if let TokenTree::Punct(p) = t {
                match p.as_char() {
                    '<' => depth += 1,
                    '>' if !prev_dash => depth -= 1,
                    _ => {}
                }
                prev_dash = p.as_char() == '-';
            } else {
                prev_dash = false;
            }
            pos += 1;
        }
        generic_tokens = tokens[start..pos - 1].to_vec();
    }
    let generic_decl = generic_tokens.clone();
    let generics = split_commas(generic_tokens.into_iter().collect())
        .into_iter()
        .map(|p| generic_param(&name, flatten(p)))
        .collect::<Result<Vec<_>, _>>()?;
    let params_pos = match tokens.get(pos) {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis => pos,
        _ => return Err(format!("#[kernel] {name}: expected the parameter list")),
    };
    let body_pos = tokens.len().saturating_sub(1);
    match tokens.get(body_pos) {
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace && body_pos > params_pos => {}
        _ => return Err(format!("#[kernel] {name}: expected the function's body")),
    }
    if tokens[params_pos + 1..body_pos]
        .iter()
        .any(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == '-'))
    {
        return Err(format!("#[kernel] {name}: a kernel returns nothing (no `-> T`)"));
    }
    let where_clause = tokens[params_pos + 1..body_pos].to_vec();
    let declared = match &tokens[params_pos] {
        TokenTree::Group(g) => g.clone(),
        _ => unreachable!("params_pos is a group (checked above)"),
    };
    tokens[params_pos] = TokenTree::Group(len::strip(&declared));
    Ok(Signature {
        declared,
        tokens,
        fn_pos,
        name,
        generics,
        generic_decl,
        where_clause,
        body_pos,
    })
}

/// One generic parameter's tokens: `E`, `E: Bound`, `const V: usize`; lifetimes are refused.
fn generic_param(kernel: &str, tokens: Vec<TokenTree>) -> Result<GenericParam, String> {
    match tokens.as_slice() {
        [TokenTree::Ident(k), TokenTree::Ident(n), TokenTree::Punct(c), ty @ ..]
            if k.to_string() == "const" && c.as_char() == ':' =>
        {
            Ok(GenericParam {
                name: n.to_string(),
                const_ty: Some(ty.to_vec()),
            })
        }
        [TokenTree::Ident(n), ..] => Ok(GenericParam {
            name: n.to_string(),
            const_ty: None,
        }),
        _ => Err(format!(
            "#[kernel] {kernel}: generic parameter `{}` is not a type or a constant (a kernel takes no \
             lifetimes)",
            text(&tokens)
        )),
    }
}
