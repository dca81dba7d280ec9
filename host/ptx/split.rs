//! One kernel's own PTX module cut out of a crate's whole one: the header, the entry, and every
//! function and variable it reaches (calls, addresses, shared-memory declarations), in their
//! original order. What a `Gpu` hands the driver the first time it launches a kernel, so that the
//! driver JIT-compiles that kernel alone, not the thousands of lines of every other kernel of the
//! crate (the first `Gpu::new` used to compile all of them: 24.5 s on a fresh H200).
//!
//! The PTX is rustc's (LLVM's NVPTX backend): a header of `.version`, `.target` and
//! `.address_size` lines, then top-level items, each a declaration ending in `;` (a variable, a
//! prototype) or a function with a `{ .. }` body (inline-asm blocks nest braces inside it).

use std::collections::{HashMap, HashSet};

/// A module's text split into its header and top-level items.
pub(crate) struct Split<'a> {
    header: Vec<&'a str>,
    items: Vec<Item<'a>>,
    /// Item indices by the name they declare or define (a function's prototype and its
    /// definition share one name).
    by_name: HashMap<&'a str, Vec<usize>>,
}

/// A top-level item: its text and the name it declares, if any.
struct Item<'a> {
    text: &'a str,
    name: Option<&'a str>,
}

impl<'a> Split<'a> {
    /// Splits `ptx` into header and items.
    pub(crate) fn new(ptx: &'a str) -> Split<'a> {
        let mut header = Vec::new();
        let mut items = Vec::new();
        let bytes = ptx.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // Between items: whitespace, comments, and the header's lines.
            match bytes[i] {
                b' ' | b'\t' | b'\r' | b'\n' => i += 1,
                b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(bytes, i),
                b'/' if bytes.get(i + 1) == Some(&b'*') => i = block_comment_end(bytes, i),
                _ if is_header_line(&ptx[i..]) => {
                    let end = line_end(bytes, i);
                    header.push(ptx[i..end].trim_end());
                    i = end;
                }
                _ => {
                    let end = item_end(bytes, i);
                    let text = &ptx[i..end];
                    items.push(Item {
                        text,
                        name: declared_name(text),
                    });
                    i = end;
                }
            }
        }
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (k, item) in items.iter().enumerate() {
            if let Some(name) = item.name {
                by_name.entry(name).or_default().push(k);
            }
        }
        Split {
            header,
            items,
            by_name,
        }
    }

    /// The module of `entry` alone: the header, then, in their original order, the items of the
    /// entry and of every name it reaches. `None` if no item defines `entry`.
    pub(crate) fn module_of(&self, entry: &str) -> Option<String> {
        let start = self.by_name.get(entry)?;
        let mut wanted: HashSet<usize> = HashSet::new();
        let mut pending: Vec<usize> = start.clone();
        while let Some(k) = pending.pop() {
            if !wanted.insert(k) {
                continue;
            }
            for word in references(self.items[k].text) {
                if let Some(targets) = self.by_name.get(word) {
                    pending.extend(targets.iter().filter(|t| !wanted.contains(t)));
                }
            }
        }
        let mut out = String::new();
        for line in &self.header {
            out.push_str(line);
            out.push('\n');
        }
        let mut kept: Vec<usize> = wanted.into_iter().collect();
        kept.sort_unstable();
        for k in kept {
            out.push('\n');
            out.push_str(self.items[k].text);
            out.push('\n');
        }
        Some(out)
    }
}

/// Whether `rest` starts with one of the header's directives (which end at the line's end).
fn is_header_line(rest: &str) -> bool {
    [".version", ".target", ".address_size"]
        .iter()
        .any(|d| rest.starts_with(d))
}

/// The index just past the end of the line `i` is on.
fn line_end(bytes: &[u8], i: usize) -> usize {
    bytes[i..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| i + p + 1)
}

/// The index just past the `*/` that closes the comment opened at `i`.
fn block_comment_end(bytes: &[u8], i: usize) -> usize {
    bytes[i + 2..]
        .windows(2)
        .position(|w| w == b"*/")
        .map_or(bytes.len(), |p| i + 2 + p + 2)
}

/// The end of the item that starts at `i`: past its `;` at brace depth 0 (a declaration, a
/// prototype, an initialised variable), or past the `}` that closes its body (a function).
fn item_end(bytes: &[u8], i: usize) -> usize {
    let mut depth = 0usize;
    let mut k = i;
    while k < bytes.len() {
        match bytes[k] {
            b'/' if bytes.get(k + 1) == Some(&b'/') => {
                k = line_end(bytes, k);
                continue;
            }
            b'/' if bytes.get(k + 1) == Some(&b'*') => {
                k = block_comment_end(bytes, k);
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                // A function's body closes; an initialiser's braces are followed by its `;`.
                if depth == 0 && is_function(&bytes[i..k]) {
                    return k + 1;
                }
            }
            b';' if depth == 0 => return k + 1,
            _ => {}
        }
        k += 1;
    }
    bytes.len()
}

/// Whether an item's text so far is a function's (its first line names `.func` or `.entry`).
fn is_function(text: &[u8]) -> bool {
    let first = text.split(|&b| b == b'\n').next().unwrap_or(text);
    let first = String::from_utf8_lossy(first);
    first.split_whitespace().any(|w| w == ".func" || w == ".entry")
}

/// The name an item declares: a function's (after `.entry` / `.func` and a return-value list),
/// or a variable's (the last identifier before its `[`, `=` or `;`).
fn declared_name(text: &str) -> Option<&str> {
    let head_end = text.find(['{', '=']).unwrap_or(text.len());
    let head = &text[..head_end];
    for keyword in [".entry", ".func"] {
        if let Some(at) = find_word(head, keyword) {
            let mut rest = head[at + keyword.len()..].trim_start();
            if rest.starts_with('(') {
                // `.func (.param .b32 retval) name(`: skip the return values.
                let close = rest.find(')')?;
                rest = rest[close + 1..].trim_start();
            }
            let end = rest.find(|c: char| !is_identifier_char(c)).unwrap_or(rest.len());
            return (end > 0).then(|| &rest[..end]);
        }
    }
    let decl = head.split(['[', ';']).next().unwrap_or(head);
    identifiers(decl).last()
}

/// The position of `word` in `text` as a whole word.
fn find_word(text: &str, word: &str) -> Option<usize> {
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        text[at + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_identifier_char(c))
    })
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// The names an item's text refers to: its identifiers but each statement's opcode (`add.s64`
/// is an instruction, not the kernel `add`; a statement is a line, or a piece of one between
/// `;`s in inline asm, after any `{`, `}` and predicate `@p`).
fn references(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .flat_map(|line| line.split(';'))
        .flat_map(|statement| {
            let s = statement.trim_start_matches(|c: char| c.is_whitespace() || c == '{' || c == '}');
            // A predicate guard, `@%p1` or `@!p`, comes before the opcode.
            let s = match s.strip_prefix('@') {
                Some(rest) => rest.split_once(char::is_whitespace).map_or("", |(_, r)| r),
                None => s,
            };
            let s = s.trim_start();
            // An instruction's opcode (letters first, then `.suffixes`) is no reference; a directive
            // (`.reg`, `.func`) and an item's header are scanned whole.
            let operands = match s.chars().next() {
                Some(c) if c.is_ascii_alphabetic() => {
                    s.split_once(char::is_whitespace).map_or("", |(_, r)| r)
                }
                _ => s,
            };
            identifiers(operands)
        })
}

/// The identifiers in `text` (PTX names: letters, digits, `_` and `$`; registers `%r1` and
/// directives `.reg` are skipped by their sigils).
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            let c = bytes[i] as char;
            if is_identifier_char(c) && !c.is_ascii_digit() {
                let sigil = i > 0 && matches!(bytes[i - 1], b'%' | b'.');
                let start = i;
                while i < bytes.len() && is_identifier_char(bytes[i] as char) {
                    i += 1;
                }
                if !sigil {
                    return Some(&text[start..i]);
                }
            } else if is_identifier_char(c) {
                // A number: skip it whole (`0f3F800000` is not a name).
                while i < bytes.len() && is_identifier_char(bytes[i] as char) {
                    i += 1;
                }
            } else {
                i += 1;
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//
// Generated by LLVM NVPTX Back-End
//

.version 8.0
.target sm_90a
.address_size 64

.func helper_b
(
\t.param .b64 helper_b_param_0
)
;
.extern .func (.param .b32 func_retval0) vprintf
(
\t.param .b64 vprintf_param_0,
\t.param .b64 vprintf_param_1
)
;
.extern .shared .align 16 .b8 gpu_launch_sized_workgroup_mem[];
.global .align 1 .b8 $str[4] = {104, 105, 10, 0};
.global .align 1 .u8 gpukern_bounds_k_384_1;
.func helper_b(
\t.param .b64 helper_b_param_0
)
{
\t// begin inline asm
{
.reg .pred p;
\tmov.u32 %r1, %tid.x;
}
\t// end inline asm
\tret;

}
\t// .globl\tk_uses_helper
.visible .entry k_uses_helper(
\t.param .u64 .ptr .align 1 k_uses_helper_param_0
)
.maxntid 384, 1, 1
{
\tmov.u64 \t%rd1, gpu_launch_sized_workgroup_mem;
\tcall.uni helper_b, (param0);
\tret;

}
\t// .globl\tk_prints
.visible .entry k_prints()
{
\tmov.u64 \t%rd1, $str;
\tcall.uni (retval0), vprintf, (param0, param1);
\tret;

}
\t// .globl\tk_alone
.visible .entry k_alone()
{
\tmov.f32 \t%f1, 0f3F800000;
\tret;

}
";

    #[test]
    fn the_items_and_their_names_are_found() {
        let split = Split::new(PTX);
        assert_eq!(
            split.header,
            [".version 8.0", ".target sm_90a", ".address_size 64"]
        );
        let names: Vec<Option<&str>> = split.items.iter().map(|i| i.name).collect();
        assert_eq!(
            names,
            [
                Some("helper_b"),
                Some("vprintf"),
                Some("gpu_launch_sized_workgroup_mem"),
                Some("$str"),
                Some("gpukern_bounds_k_384_1"),
                Some("helper_b"),
                Some("k_uses_helper"),
                Some("k_prints"),
                Some("k_alone"),
            ]
        );
        // The inline asm's braces stay inside the helper's body.
        assert!(split.items[5].text.ends_with("ret;\n\n}"));
    }

    #[test]
    fn a_module_holds_exactly_what_its_entry_reaches() {
        let split = Split::new(PTX);
        let helper = split.module_of("k_uses_helper").unwrap();
        assert!(helper.starts_with(".version 8.0\n.target sm_90a\n.address_size 64\n"));
        assert!(helper.contains(".maxntid 384, 1, 1"));
        assert_eq!(
            helper.matches(".func helper_b").count(),
            2,
            "prototype and body:\n{helper}"
        );
        assert!(helper.contains("gpu_launch_sized_workgroup_mem[];"));
        assert!(!helper.contains("vprintf") && !helper.contains("$str") && !helper.contains("k_alone"));

        let prints = split.module_of("k_prints").unwrap();
        assert!(prints.contains(".extern .func (.param .b32 func_retval0) vprintf"));
        assert!(prints.contains("$str[4] = {104, 105, 10, 0};"));
        assert!(!prints.contains("helper_b"));

        let alone = split.module_of("k_alone").unwrap();
        assert_eq!(alone.matches(".entry").count(), 1);
        assert!(!alone.contains(".func") && !alone.contains(".global"), "{alone}");
        assert!(split.module_of("missing").is_none());
    }

    #[test]
    fn opcodes_are_not_references() {
        let refs: Vec<&str> = references("\tadd.s64 %rd1, %rd2, add;\n@%p1 bra $L__BB0_2;\n{ max.f32 %f1, %f2, %f3; call.uni max_k, (p); }")
            .collect();
        assert_eq!(refs, ["add", "$L__BB0_2", "max_k", "p"]);
    }

    #[test]
    fn identifiers_skip_registers_directives_and_numbers() {
        let words: Vec<&str> = identifiers("mov.f32 %f1, 0f3F800000; call.uni helper_b, ($str);").collect();
        assert_eq!(words, ["mov", "call", "helper_b", "$str"]);
    }
}
