//! `#[kernel]`: marks a function of a kernel crate as a GPU entry point, or a generic function as
//! a family of them.
//!
//! On `nvptx64` a plain kernel becomes `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn`,
//! an entry point of the PTX module under its own name; a generic kernel stays a generic function
//! and gets one entry per instance (`#[kernel(instances(f32, bf16))]`: entries `<name>_f32` and
//! `<name>_bf16`, or the names given: `instances(my_f32 = f32, ..)`), each calling it with the
//! instance's arguments. On any other target the function stays as written, which the CPU
//! simulator calls once per simulated thread, and each entry gets a module of its own name with
//! its typed host launcher and its registry facts (`launcher`); a generic kernel also gets a
//! struct of its name, so that `name::<bf16>::launch(..)` launches an instance and a type that
//! has none is a compile error.
//!
//! A `#[kernel]` goes on a function at module level, `pub unsafe fn`, every parameter a raw
//! pointer or a `Scalar` (an integer, a float, `bool`). The attribute's arguments are in `attr`.
//! Written on bare token trees (no `syn`), so the nested PTX build pulls in no dependency.

mod attr;
mod bounds;
mod device_copy;
mod launcher;
mod len;
mod print;
mod signature;
mod tokens;

use proc_macro::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

use attr::{Instance, KernelAttr};
use signature::Signature;
use tokens::{name_piece, parse, substitute, text};

/// `gpukern_device::print!`'s expansion: `$crate; "format", args...` (see `print.rs`).
#[proc_macro]
pub fn print(input: TokenStream) -> TokenStream {
    print::expand(input)
}

/// `#[derive(DeviceCopy)]` on a `#[repr(C)]` struct: implements `gpukern_device::DeviceCopy`
/// after checking the struct is `#[repr(C)]`, every field `DeviceCopy`, and no padding.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    match device_copy::expand(item) {
        Ok(out) => out,
        Err(msg) => compile_error(&msg),
    }
}

/// Turns `pub unsafe fn name(args) { body }` into a PTX kernel on the GPU and a plain function
/// with a typed launcher on the host; with `instances(..)`, a generic function into one kernel
/// per instance (see the crate's documentation and `attr` for the arguments).
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr, item) {
        Ok(out) => out,
        Err(msg) => compile_error(&msg),
    }
}

fn expand(attr: TokenStream, item: TokenStream) -> Result<TokenStream, String> {
    let attr = attr::parse(attr)?;
    let sig = signature::parse(item.into_iter().collect())?;
    match (&attr.instances, sig.is_generic()) {
        (None, true) => {
            return Err(format!(
                "#[kernel] {}: a generic kernel needs its instances, one PTX entry each: e.g. \
                 `#[kernel(instances(f32, bf16))]`",
                sig.name
            ))
        }
        (Some(_), false) => {
            return Err(format!(
                "#[kernel] {}: `instances(..)` is for a generic kernel; this one has no generic \
                 parameters",
                sig.name
            ))
        }
        _ => {}
    }
    let body = with_shared_bindings(&sig, &attr);
    let mut out = TokenStream::new();
    match &attr.instances {
        None => {
            out.extend(plain_entry(&sig, &attr, &body));
            out.extend(host_function(&sig, &body));
            out.extend(plain_launcher(&sig, &attr)?);
        }
        Some(instances) => {
            out.extend(generic_function(&sig, &body));
            out.extend(host_function(&sig, &body));
            out.extend(instance_struct(&sig, instances)?);
            for instance in instances {
                out.extend(instance_items(&sig, &attr, instance)?);
            }
        }
    }
    Ok(out)
}

/// The body with the declared shared items bound in front of it: `let (a, b) = ..;` handles laid
/// out from the start of dynamic shared memory, and `__shared_bytes`, their bytes.
fn with_shared_bindings(sig: &Signature, attr: &KernelAttr) -> Group {
    let body = sig.body();
    if attr.shared.is_empty() {
        return body.clone();
    }
    let names: Vec<String> = attr.shared.iter().map(|s| s.name.clone()).collect();
    let types: Vec<String> = attr.shared.iter().map(|s| text(&s.ty)).collect();
    let handles = types
        .iter()
        .map(|ty| {
            format!(
                "unsafe {{ <{ty} as ::gpukern_device::shared::Declared>::at(__base.wrapping_add(__layout.place(\
                 <{ty} as ::gpukern_device::shared::Declared>::BYTES, \
                 <{ty} as ::gpukern_device::shared::Declared>::ALIGN))) }}"
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let bindings = format!(
        "#[allow(unused_variables)] let ({names},) = {{ \
             let __base = ::gpukern_device::shared::dynamic::<u8>(); \
             let mut __layout = ::gpukern_device::shared::Layout::new(); \
             ({handles},) }}; \
         #[allow(unused_variables)] let __shared_bytes: usize = {bytes} as usize;",
        names = names.join(", "),
        bytes = launcher::shared_bytes(&types),
    );
    let mut inner: TokenStream = bindings.parse().unwrap_or_default();
    inner.extend(body.stream());
    let mut group = Group::new(Delimiter::Brace, inner);
    group.set_span(body.span());
    group
}

/// A plain kernel on `nvptx64`: the item as an entry point, with `body` (and the launch-bounds
/// marker in front of it).
fn plain_entry(sig: &Signature, attr: &KernelAttr, body: &Group) -> TokenStream {
    let mut gpu = TokenStream::new();
    gpu.extend(attribute("cfg(target_arch = \"nvptx64\")"));
    gpu.extend(attribute("unsafe(no_mangle)"));
    for (i, t) in sig.tokens.iter().enumerate() {
        if i == sig.fn_pos {
            gpu.extend(extern_ptx());
        }
        if i == sig.body_pos {
            let marked = match attr.bounds {
                Some(b) => marked_body(body, &b.marker(&sig.name)),
                None => TokenTree::Group(body.clone()),
            };
            gpu.extend([marked]);
        } else {
            gpu.extend([t.clone()]);
        }
    }
    gpu
}

/// A generic kernel on `nvptx64`: the generic function itself, inlined into its entries, and
/// visible to its crate only (`pub(crate)` for any `pub`): its entries are the crate's exports.
/// A public generic function would make every function it calls reachable from other crates,
/// and so exported from the PTX module (`.visible .func`), where LLVM may no longer drop or fold
/// their parameters: the code of each entry that calls one would change.
fn generic_function(sig: &Signature, body: &Group) -> TokenStream {
    let mut gpu = TokenStream::new();
    gpu.extend(attribute("cfg(target_arch = \"nvptx64\")"));
    let has_inline = sig.tokens[..sig.fn_pos]
        .iter()
        .any(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket && g.to_string().starts_with("inline")));
    if !has_inline {
        gpu.extend(attribute("inline(always)"));
    }
    let mut item = with_body(sig, body).into_iter().peekable();
    let mut before_fn = true;
    while let Some(t) = item.next() {
        match &t {
            TokenTree::Ident(i) if before_fn && i.to_string() == "pub" => {
                // `pub` or `pub(..)` becomes `pub(crate)`.
                let scoped = matches!(item.peek(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
                if scoped {
                    item.next();
                }
                gpu.extend("pub(crate)".parse::<TokenStream>().unwrap_or_default());
            }
            _ => {
                before_fn &= !matches!(&t, TokenTree::Ident(i) if i.to_string() == "fn");
                gpu.extend([t]);
            }
        }
    }
    gpu
}

/// The function on the host, as written (with `body`), for the simulator to call.
fn host_function(sig: &Signature, body: &Group) -> TokenStream {
    let mut host = TokenStream::new();
    host.extend(attribute("cfg(not(target_arch = \"nvptx64\"))"));
    host.extend(with_body(sig, body));
    host
}

/// The item's tokens with its body replaced.
fn with_body(sig: &Signature, body: &Group) -> TokenStream {
    let mut out = TokenStream::new();
    for (i, t) in sig.tokens.iter().enumerate() {
        if i == sig.body_pos {
            out.extend([TokenTree::Group(body.clone())]);
        } else {
            out.extend([t.clone()]);
        }
    }
    out
}

/// The launcher module of a plain kernel.
fn plain_launcher(sig: &Signature, attr: &KernelAttr) -> Result<TokenStream, String> {
    let params = launcher::params(&sig.name, sig.declared_params().stream())?;
    let source = launcher::render(&launcher::Entry {
        name: &sig.name,
        call: format!("super::{}", sig.name),
        params: &params,
        bounds: attr.bounds,
        aliases: String::new(),
        block: attr.block.as_deref().map(text),
        barriers: attr.barriers.as_deref().map(text),
        shared: attr.shared.iter().map(|s| text(&s.ty)).collect(),
        doc: format!(
            "The host's launcher of the kernel [`{0}`](fn@{0}), generated by `#[kernel]`.",
            sig.name
        ),
    });
    parse(&source, "launcher")
}

/// An instance's generic arguments as they go between `<>`: constants that are not literals in
/// braces.
fn instance_args(sig: &Signature, instance: &Instance) -> Result<Vec<String>, String> {
    if instance.args.len() != sig.generics.len() {
        return Err(format!(
            "#[kernel] {}: instance `{}` has {} generic arguments, the kernel {} ({})",
            sig.name,
            instance
                .args
                .iter()
                .map(|a| text(a))
                .collect::<Vec<_>>()
                .join(", "),
            instance.args.len(),
            sig.generics.len(),
            sig.generics
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(sig
        .generics
        .iter()
        .zip(&instance.args)
        .map(|(g, a)| match (&g.const_ty, a.as_slice()) {
            (Some(_), [TokenTree::Literal(_)]) | (None, _) => text(a),
            (Some(_), _) => format!("{{ {} }}", text(a)),
        })
        .collect())
}

/// An instance's PTX entry name: the one given, or `<kernel>_<arguments>`.
fn entry_name(sig: &Signature, instance: &Instance) -> String {
    instance.name.clone().unwrap_or_else(|| {
        let pieces: Vec<String> = instance.args.iter().map(|a| name_piece(a)).collect();
        format!("{}_{}", sig.name, pieces.join("_"))
    })
}

/// The struct a generic kernel's instances are launched through on the host:
/// `name::<A, B>::launch(..)`.
fn instance_struct(sig: &Signature, instances: &[Instance]) -> Result<TokenStream, String> {
    let params = sig
        .generics
        .iter()
        .map(|g| match &g.const_ty {
            Some(ty) => format!("const {}: {}", g.name, text(ty)),
            None => g.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let types = sig
        .generics
        .iter()
        .filter(|g| g.const_ty.is_none())
        .map(|g| format!("{},", g.name))
        .collect::<String>();
    let list = instances
        .iter()
        .map(|i| {
            instance_args(sig, i).map(|a| {
                format!(
                    "`{}::<{}>` (entry `{}`)",
                    sig.name,
                    a.join(", "),
                    entry_name(sig, i)
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?
        .join(", ");
    let name = &sig.name;
    let source = format!(
        "#[cfg(not(target_arch = \"nvptx64\"))]
         #[doc = {doc:?}]
         #[allow(non_camel_case_types)]
         pub struct {name}<{params}> {{ _instance: ::core::marker::PhantomData<({types})> }}",
        doc = format!(
            "The host's typed launcher of the generic kernel [`{name}`](fn@{name}), generated by \
             `#[kernel]`: `{name}::<..>::launch(..)` for each of its instances, {list}; any other \
             arguments are a compile error."
        ),
    );
    let mut out = parse(&source, "instance struct")?;
    out.extend(generic_launch(sig)?);
    Ok(out)
}

/// `name::<..>::launch(..)`: one launch for every instance, generic over the kernel's own
/// parameters (with its bounds), its kernel description from the instance's `Instance` impl.
fn generic_launch(sig: &Signature) -> Result<TokenStream, String> {
    let name = &sig.name;
    let params = launcher::params(name, sig.declared_params().stream())?;
    let decl = text(&sig.generic_decl);
    let use_args = sig
        .generics
        .iter()
        .map(|g| g.name.clone())
        .collect::<Vec<_>>()
        .join(", ");
    // What the launch needs of the parameters' types, which may name the kernel's generic
    // parameters: buffers of `Copy + 'static` elements, scalars that are `Scalar`.
    let mut predicates: Vec<String> = params
        .iter()
        .map(|p| match p.kind {
            launcher::Kind::Scalar => format!("{}: ::gpukern_device::launch::Scalar", p.ty),
            _ => format!("{}: ::core::marker::Copy + 'static", p.ty),
        })
        .collect();
    predicates.push("Self: ::gpukern_device::launch::Instance".into());
    let where_clause = text(&sig.where_clause);
    let bounds = if where_clause.trim().is_empty() {
        format!("where {}", predicates.join(", "))
    } else {
        format!("{where_clause}, {}", predicates.join(", "))
    };
    let launch = launcher::launch_fns(
        "<Self as ::gpukern_device::launch::Instance>::KERNEL",
        &format!("{name}::<{use_args}>"),
        "Self::launch_views",
        &params,
    );
    let source = format!(
        "#[cfg(not(target_arch = \"nvptx64\"))]
         impl<{decl}> {name}<{use_args}> {bounds} {{ {launch} }}"
    );
    parse(&source, "generic launch")
}

/// One instance of a generic kernel: its PTX entry (on `nvptx64`), its launcher module and
/// registry entry, and the launch through the generic struct (on the host).
fn instance_items(sig: &Signature, attr: &KernelAttr, instance: &Instance) -> Result<TokenStream, String> {
    let args = instance_args(sig, instance)?;
    let entry = entry_name(sig, instance);
    let name = &sig.name;
    let turbofish = format!("{name}::<{}>", args.join(", "));
    // The parameter list with the generic parameters replaced by this instance's arguments.
    let replace = |i: &Ident| {
        sig.generics
            .iter()
            .position(|g| g.name == i.to_string())
            .map(|k| instance.args[k].clone())
    };
    let param_tokens: Vec<TokenTree> = sig.declared_params().stream().into_iter().collect();
    let concrete = substitute(&param_tokens, &replace);
    let params = launcher::params(&entry, concrete.iter().cloned().collect())?;

    // The entry on the GPU: a wrapper with the concrete signature that calls the instance.
    let forwarded = params
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let entry_params = params
        .iter()
        .map(|p| format!("{}: {}", p.name, p.written))
        .collect::<Vec<_>>()
        .join(", ");
    let marker = attr
        .bounds
        .map(|b| {
            format!(
                "#[used] #[unsafe(no_mangle)] #[allow(non_upper_case_globals)] static {}: u8 = 0;",
                b.marker(&entry)
            )
        })
        .unwrap_or_default();
    let gpu = format!(
        "#[cfg(target_arch = \"nvptx64\")]
         #[unsafe(no_mangle)]
         #[doc = {doc:?}]
         #[allow(clippy::too_many_arguments)]
         pub unsafe extern \"ptx-kernel\" fn {entry}({entry_params}) {{
             {marker}
             // SAFETY: the kernel's own contract, forwarded.
             unsafe {{ {turbofish}({forwarded}) }}
         }}",
        doc = format!(
            "[`{name}`](fn@{name}) with `<{}>`: a PTX entry of its own.",
            args.join(", ")
        ),
    );

    // The launcher module, with the generic parameters as aliases for the facts' expressions.
    let aliases = sig
        .generics
        .iter()
        .zip(&instance.args)
        .map(|(g, a)| match &g.const_ty {
            Some(ty) => format!(
                "#[allow(non_upper_case_globals, dead_code)] const {}: {} = {};",
                g.name,
                text(ty),
                text(a)
            ),
            None => format!(
                "#[allow(non_camel_case_types, dead_code)] type {} = {};",
                g.name,
                text(a)
            ),
        })
        .collect::<String>();
    let module = launcher::render(&launcher::Entry {
        name: &entry,
        call: format!("super::{turbofish}"),
        params: &params,
        bounds: attr.bounds,
        aliases,
        block: attr.block.as_deref().map(text),
        barriers: attr.barriers.as_deref().map(text),
        shared: attr.shared.iter().map(|s| text(&s.ty)).collect(),
        doc: format!(
            "The host's launcher of [`{name}`](fn@{name}) with `<{}>` (the PTX entry `{entry}`), \
             generated by `#[kernel]`.",
            args.join(", ")
        ),
    });

    // The instance, for the generic struct's launch.
    let typed = format!(
        "#[cfg(not(target_arch = \"nvptx64\"))]
         impl ::gpukern_device::launch::Instance for {name}<{args}> {{
             const KERNEL: &'static ::gpukern_device::launch::Kernel = &{entry}::KERNEL;
         }}",
        args = args.join(", "),
    );
    let mut out = parse(&gpu, "instance entry")?;
    out.extend(parse(&module, "launcher")?);
    out.extend(parse(&typed, "instance launch")?);
    Ok(out)
}

/// `extern "ptx-kernel"`, to put in front of `fn`.
fn extern_ptx() -> [TokenTree; 2] {
    [
        TokenTree::Ident(Ident::new("extern", Span::call_site())),
        TokenTree::Literal(Literal::string("ptx-kernel")),
    ]
}

/// `{ <marker static> { body } }`: the body with the launch-bounds marker declared in front of
/// it, inside the function, so that the marker is in the PTX exactly when the entry is.
fn marked_body(body: &Group, marker: &str) -> TokenTree {
    let mut inner: TokenStream =
        format!("#[used] #[unsafe(no_mangle)] #[allow(non_upper_case_globals)] static {marker}: u8 = 0;")
            .parse()
            .unwrap_or_default();
    inner.extend([TokenTree::Group(body.clone())]);
    let mut group = Group::new(Delimiter::Brace, inner);
    group.set_span(body.span());
    TokenTree::Group(group)
}

/// `#[text]` as tokens.
fn attribute(text: &str) -> TokenStream {
    let inner: TokenStream = text.parse().unwrap_or_default();
    [
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, inner)),
    ]
    .into_iter()
    .collect()
}

/// A `compile_error!` carrying `msg`.
fn compile_error(msg: &str) -> TokenStream {
    format!("compile_error!({msg:?});").parse().unwrap_or_default()
}
