//! The host launcher `#[kernel]` emits for each PTX entry (each instance of a generic kernel): a
//! module named after the entry holding its `KERNEL` description (name, crate, parameters, launch
//! bounds, registry facts) and a typed `launch` function (see `gpukern_device::launch`).
//!
//! The parameters are read from bare tokens: `name(p: *const T, q: *mut U, s: S, ...)`. A type
//! that came through a `macro_rules!` fragment (`$t:ty`) arrives wrapped in an invisible group,
//! which is looked through.

use proc_macro::{TokenStream, TokenTree};

use crate::bounds::Bounds;
use crate::len;
use crate::tokens::{flatten, split_commas, text};

/// How one kernel parameter is passed from the host.
pub enum Kind {
    Input,
    Output,
    Scalar,
}

/// One kernel parameter: its name, how it is passed, and the type of its elements (pointers) or
/// its own type (scalars), as source text.
pub struct Param {
    pub name: String,
    pub kind: Kind,
    pub ty: String,
    pub written: String,
    /// Its `#[len(..)]` expression (pointers only).
    pub len: Option<String>,
}

/// The kernel's parameters from its parameter list's tokens (generic parameters already
/// replaced by an instance's arguments, where they are).
pub fn params(kernel: &str, stream: TokenStream) -> Result<Vec<Param>, String> {
    split_commas(stream)
        .into_iter()
        .enumerate()
        .map(|(i, p)| parse_param(kernel, i, p))
        .collect()
}

fn parse_param(kernel: &str, index: usize, tokens: Vec<TokenTree>) -> Result<Param, String> {
    let tokens = flatten(tokens);
    // Attributes on parameters (`#[allow(..)] x: T`) are skipped, but for `#[len(..)]`.
    let mut rest: &[TokenTree] = &tokens;
    while let [TokenTree::Punct(p), TokenTree::Group(_), tail @ ..] = rest {
        if p.as_char() != '#' {
            break;
        }
        rest = tail;
    }
    let attributes = &tokens[..tokens.len() - rest.len()];
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
    let len = len::declared(attributes, &name)?;
    if len.is_some() && matches!(kind, Kind::Scalar) {
        return Err(format!(
            "#[kernel] {kernel}: `#[len(..)]` goes on a pointer parameter (`*const T` or `*mut T`): \
             it says how many elements the kernel may touch through it; `{name}` is a `{written}`"
        ));
    }
    Ok(Param {
        name,
        kind,
        ty,
        written,
        len,
    })
}

/// Everything one entry's launcher module is made of, as source text.
pub struct Entry<'a> {
    /// The PTX entry's name, and the module's.
    pub name: &'a str,
    /// What the simulator calls: `super::scale` or `super::scale::<f32, { N }>`.
    pub call: String,
    /// Its parameters (generic ones replaced by the instance's arguments).
    pub params: &'a [Param],
    pub bounds: Option<Bounds>,
    /// Items placed first in the module: a generic kernel's parameters as aliases of the
    /// instance's arguments (`type E = bf16;`), so that the facts' expressions see them.
    pub aliases: String,
    /// The facts' expressions (`None`: not declared).
    pub block: Option<String>,
    pub barriers: Option<String>,
    /// The declared shared items' types.
    pub shared: Vec<String>,
    /// A line of documentation about the kernel (and the instance).
    pub doc: String,
}

/// The `const` expression of the bytes of the declared shared items, laid out in order.
pub fn shared_bytes(shared: &[String]) -> String {
    if shared.is_empty() {
        return "0".into();
    }
    let places = shared
        .iter()
        .map(|ty| {
            format!(
                "__layout.place(<{ty} as ::gpukern_device::shared::Declared>::BYTES, \
                 <{ty} as ::gpukern_device::shared::Declared>::ALIGN);"
            )
        })
        .collect::<String>();
    format!(
        "{{ let mut __layout = ::gpukern_device::shared::Layout::new(); {places} __layout.bytes() as u32 }}"
    )
}

/// The `Option<Declared>` a buffer parameter's gather passes: its `#[len(..)]` evaluated.
fn declared(p: &Param) -> String {
    match &p.len {
        Some(expr) => {
            format!("::core::option::Option::Some(::gpukern_device::launch::Declared::new({expr:?}, {expr}))")
        }
        None => "::core::option::Option::None".into(),
    }
}

/// Whether the launcher is safe: the kernel declares `#[len(..)]` for every pointer parameter
/// (and has at least one).
pub fn is_checked(params: &[Param]) -> bool {
    let pointers = params.iter().filter(|p| !matches!(p.kind, Kind::Scalar));
    pointers.clone().count() > 0 && pointers.into_iter().all(|p| p.len.is_some())
}

/// The launch functions' qualifiers and contract: `(qualifier, safety doc, justification)`, for a
/// checked kernel (safe) or not (`unsafe`).
pub fn safety(checked: bool) -> (&'static str, &'static str, &'static str) {
    if checked {
        (
            "",
            "///\n/// Safe: the kernel declares, with `#[len(..)]`, how many elements it touches through \
             each pointer parameter, and the launch is refused (an error naming the parameter) when \
             a buffer holds fewer; the simulator reports any access past a declared length.",
            "// SAFETY: every pointer parameter has a declared length the kernel promises to stay \
             // within (its `#[len(..)]`s, checked by the simulator), and the launcher refuses a \
             // buffer shorter than it.",
        )
    } else {
        (
            "unsafe",
            "///\n/// # Safety\n/// The kernel's own contract: the buffers hold every element it touches \
             for these arguments and this launch shape.",
            "// SAFETY: the caller upholds the kernel's contract.",
        )
    }
}

/// `launch`'s body: the call of `launch_views` (`Self::launch_views` in a generic kernel's impl)
/// with the buffers turned into views.
pub fn forward_call(checked: bool, callee: &str, forward: &str) -> String {
    match checked {
        true => format!("{callee}(on, config, {forward})"),
        false => format!(
            "// SAFETY: the caller's contract, forwarded.\n unsafe {{ {callee}(on, config, {forward}) }}"
        ),
    }
}

/// Assertions, at the kernel's definition, that each buffer's element type is `DeviceCopy` and
/// each by-value parameter's type a `Scalar`: a parameter no launch could take is an error here,
/// not at a call site.
pub fn element_checks(params: &[Param]) -> String {
    let checks = params
        .iter()
        .map(|p| match p.kind {
            Kind::Scalar => format!("__scalar::<{}>();", p.ty),
            _ => format!("__element::<{}>();", p.ty),
        })
        .collect::<String>();
    format!(
        "#[allow(dead_code, clippy::extra_unused_type_parameters)]
         const _: () = {{
             fn __element<T: ::gpukern_device::DeviceCopy>() {{}}
             fn __scalar<T: ::gpukern_device::launch::Scalar>() {{}}
             fn __params() {{ {checks} }}
         }};"
    )
}

/// The pieces of a launcher's two functions, as source text.
pub struct LaunchParts {
    /// `launch`'s parameters: a buffer is any `BufferArg` of the launcher's view type.
    pub signature: String,
    /// `launch_views`' parameters: a buffer is the launcher's view type itself.
    pub view_signature: String,
    /// `launch`'s arguments to `launch_views`: each buffer turned into its view.
    pub forward: String,
    /// The view parameters and scalars added to the launch, in order (`__L::input(..)`, ..).
    pub gather: String,
    /// The kernel's arguments in the simulator's call.
    pub call_args: String,
    /// The host's counterparts, for the documentation.
    pub host_args: String,
}

/// The launch functions' signatures and forwarding parts.
pub fn launch_parts(params: &[Param]) -> LaunchParts {
    let join = |f: &dyn Fn(&Param) -> String, sep: &str| params.iter().map(f).collect::<Vec<_>>().join(sep);
    LaunchParts {
        signature: join(
            &|p| match p.kind {
                Kind::Input => format!(
                    "{}: impl ::gpukern_device::launch::BufferArg<__L::Input<'__a, {}>>",
                    p.name, p.ty
                ),
                Kind::Output => format!(
                    "{}: impl ::gpukern_device::launch::BufferArg<__L::Output<'__a, {}>>",
                    p.name, p.ty
                ),
                Kind::Scalar => format!("{}: {}", p.name, p.ty),
            },
            ", ",
        ),
        view_signature: join(
            &|p| match p.kind {
                Kind::Input => format!("{}: __L::Input<'__a, {}>", p.name, p.ty),
                Kind::Output => format!("{}: __L::Output<'__a, {}>", p.name, p.ty),
                Kind::Scalar => format!("{}: {}", p.name, p.ty),
            },
            ", ",
        ),
        forward: join(
            &|p| match p.kind {
                Kind::Input | Kind::Output => {
                    format!("::gpukern_device::launch::BufferArg::into_target({})", p.name)
                }
                Kind::Scalar => p.name.clone(),
            },
            ", ",
        ),
        gather: join(
            &|p| match p.kind {
                Kind::Input => format!(
                    "let {0} = __L::input(&mut __args, {0}, {1});",
                    p.name,
                    declared(p)
                ),
                Kind::Output => format!(
                    "let {0} = __L::output(&mut __args, {0}, {1});",
                    p.name,
                    declared(p)
                ),
                Kind::Scalar => format!("__L::scalar(&mut __args, {});", p.name),
            },
            "\n",
        ),
        call_args: join(&|p| p.name.clone(), ", "),
        host_args: join(
            &|p| match p.kind {
                Kind::Input => format!("`{}: &DeviceVec<{}>` or a view", p.name, p.ty),
                Kind::Output => format!("`{}: &mut DeviceVec<{}>` or a mutable view", p.name, p.ty),
                Kind::Scalar => format!("`{}: {}`", p.name, p.ty),
            },
            ", ",
        ),
    }
}

/// The source of the two typed launch functions, `launch` and `launch_views`: `kernel` the
/// expression of the kernel's `&'static Kernel`, `call` what the simulator calls with the pointers
/// and scalars, `views` how `launch` names `launch_views` (`launch_views` in a launcher module,
/// `Self::launch_views` in a generic kernel's impl). One renderer for both places.
pub fn launch_fns(kernel: &str, call: &str, views: &str, params: &[Param]) -> String {
    let LaunchParts {
        signature,
        view_signature,
        forward,
        gather,
        call_args,
        host_args,
    } = launch_parts(params);
    let checked = is_checked(params);
    let (qualifier, safety_doc, justification) = safety(checked);
    let forward_call = forward_call(checked, views, &forward);
    format!(
        r#"
    /// Launches the kernel on `on` (gpukern's `Module`: a CUDA device or the simulator) with
    /// `config` (plus its declared shared memory, if any); the arguments are the host's
    /// counterparts of the kernel's ({host_args}).
    {safety_doc}
    #[allow(clippy::too_many_arguments)]
    pub {qualifier} fn launch<'__a, __L: ::gpukern_device::launch::Launcher>(
        on: &'__a __L,
        config: __L::Config,
        {signature}
    ) -> ::core::result::Result<(), __L::Error> {{
        {forward_call}
    }}

    /// `launch` with the launcher's view types themselves (`v.view()`, `v.view_mut()`,
    /// `v.slice(..)?`) for the buffers: no generic argument types, so that it coerces to a
    /// function pointer (a table of launchers of one signature).
    {safety_doc}
    #[allow(clippy::too_many_arguments)]
    pub {qualifier} fn launch_views<'__a, __L: ::gpukern_device::launch::Launcher>(
        on: &'__a __L,
        config: __L::Config,
        {view_signature}
    ) -> ::core::result::Result<(), __L::Error> {{
        let __kernel: &'static ::gpukern_device::launch::Kernel = {kernel};
        let config = __L::add_shared_bytes(config, __kernel.facts.shared_bytes);
        let mut __args = on.begin(__kernel, config);
        {gather}
        {justification} The simulator calls the closure with the pointers registered above.
        unsafe {{ __L::launch(__args, &|| unsafe {{ {call}({call_args}) }}) }}
    }}
"#
    )
}

/// The launcher module's source.
pub fn render(e: &Entry) -> String {
    let name = e.name;
    let (max_threads, min_blocks, launch_bounds) = match e.bounds {
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
    let block = match (&e.block, e.bounds) {
        (Some(expr), _) => format!("Some(({expr}) as u32)"),
        (None, Some(b)) => format!("Some({})", b.max_threads),
        (None, None) => "None".into(),
    };
    let barriers = match &e.barriers {
        Some(expr) => format!("Some(({expr}) as u32)"),
        None => "None".into(),
    };
    let shared_bytes = shared_bytes(&e.shared);
    let describe = e
        .params
        .iter()
        .map(|p| {
            let kind = match p.kind {
                Kind::Input => "Input",
                Kind::Output => "Output",
                Kind::Scalar => "Scalar",
            };
            format!(
                "::gpukern_device::launch::Param {{ name: {:?}, kind: ::gpukern_device::launch::ParamKind::{kind}, ty: {:?}, len: {:?} }}",
                p.name, p.written, p.len
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let (aliases, doc) = (&e.aliases, &e.doc);
    let launch = launch_fns("&KERNEL", &e.call, "launch_views", e.params);
    let element_checks = element_checks(e.params);
    format!(
        r#"
#[cfg(not(target_arch = "nvptx64"))]
#[doc = {doc:?}]
#[allow(non_snake_case, unused_imports, clippy::all)]
pub mod {name} {{
    use super::*;
    {aliases}

    /// The kernel's entry point, crate, parameters and registry facts.
    pub static KERNEL: ::gpukern_device::launch::Kernel = ::gpukern_device::launch::Kernel {{
        name: {name:?},
        krate: ::core::env!("CARGO_CRATE_NAME"),
        params: &[{describe}],
        bounds: {launch_bounds},
        launches: ::gpukern_device::launch::LaunchCounts::new(),
        facts: ::gpukern_device::launch::Facts {{
            block: {block},
            barriers: {barriers},
            shared_bytes: {shared_bytes},
        }},
    }};

    /// Most threads per block the kernel may be launched with (`.maxntid` in its PTX), from
    /// `#[kernel(launch_bounds(..))]`; `None` without launch bounds.
    pub const MAX_THREADS: ::core::option::Option<u32> = {max_threads};

    /// Blocks of [`MAX_THREADS`] threads that must fit on one multiprocessor at once
    /// (`.minnctapersm`, which caps the registers per thread), from
    /// `#[kernel(launch_bounds(..))]`; `None` without launch bounds.
    pub const MIN_BLOCKS: ::core::option::Option<u32> = {min_blocks};

    {element_checks}

    {launch}
}}

#[cfg(not(target_arch = "nvptx64"))]
::gpukern_device::__inventory::submit! {{
    ::gpukern_device::launch::Registered(&{name}::KERNEL)
}}
"#
    )
}
