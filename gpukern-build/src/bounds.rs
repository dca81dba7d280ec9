//! Launch bounds in the PTX: `.maxntid` and `.minnctapersm` for the kernels marked by
//! `#[kernel(launch_bounds(MAX_THREADS, MIN_BLOCKS))]`.
//!
//! rustc writes neither directive. `#[kernel]` declares, inside a bounded kernel's body, a
//! `#[used]` `#[no_mangle]` byte named `__gpukern_bounds_<max>_<min>_<kernel>`, which rustc emits
//! as a one-byte global of that name:
//!
//! ```text
//! .visible .global .align 1 .b8 __gpukern_bounds_384_1_produce_consume[1];
//! ```
//!
//! [`apply`] reads the markers, writes `.maxntid <max>, 1, 1` and `.minnctapersm <min>` between
//! the parameter list of entry `<kernel>` and its body's `{`, and drops each marker's
//! declaration (nothing refers to it). PTX without markers comes back byte for byte.

use crate::BuildError;

/// The prefix of a marker's name (`#[kernel]` writes the same text).
pub const MARKER_PREFIX: &str = "__gpukern_bounds_";

/// The launch bounds of one entry, as a marker states them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Marker {
    /// The marker global's name.
    name: String,
    /// The entry point it bounds.
    kernel: String,
    max_threads: u32,
    min_blocks: u32,
}

/// `ptx` with the launch bounds of every marked entry written in and the markers' declarations
/// removed; an error names a marker whose entry is not in `ptx` or that already has launch
/// bounds, or a malformed marker.
pub fn apply(ptx: &str) -> Result<String, BuildError> {
    let markers = markers(ptx)?;
    if markers.is_empty() {
        return Ok(ptx.to_string());
    }
    let lines: Vec<&str> = ptx.split_inclusive('\n').collect();
    // Where each entry's body opens, and what goes in front of it.
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for marker in &markers {
        let header = lines
            .iter()
            .position(|line| entry_name(line) == Some(marker.kernel.as_str()))
            .ok_or_else(|| {
                BuildError(format!(
                    "launch bounds: the PTX has the marker `{}` but no entry point `{}`; a \
                     #[kernel(launch_bounds(..))] must be the PTX entry it marks",
                    marker.name, marker.kernel
                ))
            })?;
        let open = (header..lines.len())
            .find(|&i| lines[i].trim() == "{")
            .ok_or_else(|| {
                BuildError(format!(
                    "launch bounds: the entry `{}` has no body `{{` in the PTX",
                    marker.kernel
                ))
            })?;
        if lines[header..open]
            .iter()
            .any(|l| l.contains(".maxntid") || l.contains(".reqntid") || l.contains(".minnctapersm"))
        {
            return Err(BuildError(format!(
                "launch bounds: the entry `{}` already has launch bounds in the PTX",
                marker.kernel
            )));
        }
        inserts.push((
            open,
            format!(
                ".maxntid {}, 1, 1\n.minnctapersm {}\n",
                marker.max_threads, marker.min_blocks
            ),
        ));
    }
    // Marker declarations (and comments naming them) go, if nothing else names the marker.
    let mut dropped = vec![false; lines.len()];
    for marker in &markers {
        let naming: Vec<usize> = (0..lines.len())
            .filter(|&i| names(lines[i], &marker.name))
            .collect();
        let only_declared = naming.iter().all(|&i| {
            let line = lines[i].trim_start();
            line.starts_with("//") || is_declaration(line)
        });
        if only_declared {
            for i in naming {
                dropped[i] = true;
            }
        }
    }
    let mut out = String::with_capacity(ptx.len() + 48 * markers.len());
    for (i, line) in lines.iter().enumerate() {
        for (_, text) in inserts.iter().filter(|(at, _)| *at == i) {
            out.push_str(text);
        }
        if !dropped[i] {
            out.push_str(line);
        }
    }
    Ok(out)
}

/// The markers declared in `ptx`, in order, each once.
fn markers(ptx: &str) -> Result<Vec<Marker>, BuildError> {
    let mut found: Vec<Marker> = Vec::new();
    for line in ptx.lines().filter(|l| is_declaration(l.trim_start())) {
        let Some(at) = line.find(MARKER_PREFIX) else {
            continue;
        };
        let name: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let marker = parse_marker(&name)?;
        if let Some(other) = found.iter().find(|m| m.kernel == marker.kernel) {
            if *other != marker {
                return Err(BuildError(format!(
                    "launch bounds: two markers for the entry `{}`: `{}` and `{}`",
                    marker.kernel, other.name, marker.name
                )));
            }
            continue;
        }
        found.push(marker);
    }
    Ok(found)
}

/// `__gpukern_bounds_<max>_<min>_<kernel>` -> its parts.
fn parse_marker(name: &str) -> Result<Marker, BuildError> {
    let malformed = || {
        BuildError(format!(
            "launch bounds: `{name}` is not a marker `{MARKER_PREFIX}<max threads>_<min blocks>_<kernel>`"
        ))
    };
    let rest = name.strip_prefix(MARKER_PREFIX).ok_or_else(malformed)?;
    let mut parts = rest.splitn(3, '_');
    let (Some(max), Some(min), Some(kernel)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(malformed());
    };
    let max_threads: u32 = max.parse().map_err(|_| malformed())?;
    let min_blocks: u32 = min.parse().map_err(|_| malformed())?;
    if kernel.is_empty() || !(1..=1024).contains(&max_threads) || min_blocks == 0 {
        return Err(malformed());
    }
    Ok(Marker {
        name: name.to_string(),
        kernel: kernel.to_string(),
        max_threads,
        min_blocks,
    })
}

/// Whether `line` (leading space trimmed) declares a global variable: `.visible .global ...`,
/// `.global ...`, `.extern .global ...`.
fn is_declaration(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let first = words.next();
    let second = words.next();
    first == Some(".global")
        || (matches!(first, Some(".visible" | ".extern" | ".weak")) && second == Some(".global"))
}

/// The name of the entry point that `line` opens (`.visible .entry name(` / `.entry name(` /
/// `.weak .entry name(`), if it opens one.
fn entry_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix(".visible")
        .or_else(|| rest.strip_prefix(".weak"))
        .unwrap_or(rest)
        .trim_start();
    let rest = rest.strip_prefix(".entry")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    Some(&rest[..end]).filter(|n| !n.is_empty())
}

/// Whether `line` has `name` as a whole identifier.
fn names(line: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rustc's PTX for two entries, one with parameters over several lines, one without, and a
    /// device function between them (its `.noreturn` sits where the bounds go on an entry).
    const PTX: &str = "//
// Generated by LLVM NVPTX Back-End
//

.version 7.8
.target sm_90
.address_size 64

\t// .globl\t_RNvCs_7___rustc17rust_begin_unwind
MARKERS
.visible .func _RNvCs_7___rustc17rust_begin_unwind(
\t.param .b64 _RNvCs_7___rustc17rust_begin_unwind_param_0
)
.noreturn
{


$L__BB0_1:
\tbra.uni \t$L__BB0_1;

}
\t// .globl\tproduce_consume
.visible .entry produce_consume(
\t.param .u64 .ptr .align 1 produce_consume_param_0,
\t.param .u64 produce_consume_param_1
)
{
\t.reg .b64 \t%rd<3>;

\tld.param.b64 \t%rd1, [produce_consume_param_0];
\tret;

}
\t// .globl\tprobe
.visible .entry probe()
{


\tret;

}
";

    fn ptx(markers: &str) -> String {
        PTX.replace("MARKERS\n", markers)
    }

    fn applied(text: &str) -> String {
        apply(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ptx_without_markers_is_unchanged() {
        let text = ptx("");
        assert_eq!(applied(&text), text);
        assert_eq!(applied(""), "");
    }

    #[test]
    fn bounds_go_before_the_body_of_an_entry_with_parameters() {
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_384_1_produce_consume[1];\n");
        let expected = ptx("").replace(
            "\t.param .u64 produce_consume_param_1\n)\n{\n",
            "\t.param .u64 produce_consume_param_1\n)\n.maxntid 384, 1, 1\n.minnctapersm 1\n{\n",
        );
        assert_ne!(expected, ptx(""), "the expected text has the bounds");
        assert_eq!(applied(&text), expected);
    }

    #[test]
    fn every_marked_entry_gets_its_own_bounds() {
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_128_4_probe[1];\n\
             .visible .global .align 1 .b8 __gpukern_bounds_384_2_produce_consume[1];\n");
        let expected = ptx("")
            .replace(
                "produce_consume_param_1\n)\n{\n",
                "produce_consume_param_1\n)\n.maxntid 384, 1, 1\n.minnctapersm 2\n{\n",
            )
            .replace(
                ".visible .entry probe()\n{\n",
                ".visible .entry probe()\n.maxntid 128, 1, 1\n.minnctapersm 4\n{\n",
            );
        assert_eq!(applied(&text), expected);
        assert!(!applied(&text).contains(MARKER_PREFIX), "the markers are dropped");
    }

    #[test]
    fn a_kernel_name_with_underscores_and_digits_is_read_whole() {
        let m = parse_marker("__gpukern_bounds_256_1_gemm_128x256_v2").map_err(|e| e.to_string());
        assert_eq!(
            m,
            Ok(Marker {
                name: "__gpukern_bounds_256_1_gemm_128x256_v2".into(),
                kernel: "gemm_128x256_v2".into(),
                max_threads: 256,
                min_blocks: 1,
            })
        );
        assert!(parse_marker("__gpukern_bounds_256_gemm").is_err());
        assert!(parse_marker("__gpukern_bounds_0_1_k").is_err());
        assert!(parse_marker("__gpukern_bounds_2048_1_k").is_err());
        assert!(parse_marker("__gpukern_bounds_256_0_k").is_err());
        assert!(parse_marker("__gpukern_bounds_256_1_").is_err());
    }

    #[test]
    fn a_marker_without_its_entry_is_an_error() {
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_384_1_missing[1];\n");
        let e = apply(&text).map(|_| ()).map_err(|e| e.to_string());
        assert!(
            e.as_ref().is_err_and(|e| e.contains("no entry point `missing`")),
            "{e:?}"
        );
        // `probe` is a prefix of no entry here, but `produce` is one of `produce_consume`.
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_384_1_produce[1];\n");
        assert!(apply(&text).is_err(), "an entry's name is matched whole");
    }

    #[test]
    fn bounds_are_written_once() {
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_384_1_probe[1];\n").replace(
            ".visible .entry probe()\n",
            ".visible .entry probe()\n.maxntid 64, 1, 1\n",
        );
        assert!(apply(&text).is_err(), "an entry with bounds already is an error");
    }

    #[test]
    fn a_marker_something_refers_to_is_kept() {
        let text = ptx(".visible .global .align 1 .b8 __gpukern_bounds_384_1_probe[1];\n").replace(
            "\tret;\n\n}\n",
            "\tmov.u64 %rd1, __gpukern_bounds_384_1_probe;\n\tret;\n\n}\n",
        );
        let out = applied(&text);
        assert!(out.contains(".visible .global .align 1 .b8 __gpukern_bounds_384_1_probe[1];"));
        assert!(out.contains(".visible .entry probe()\n.maxntid 384, 1, 1\n.minnctapersm 1\n{\n"));
    }

    #[test]
    fn entry_names_are_read_from_entry_lines_only() {
        assert_eq!(entry_name(".visible .entry probe()"), Some("probe"));
        assert_eq!(entry_name(".entry k_2("), Some("k_2"));
        assert_eq!(entry_name(".weak .entry w("), Some("w"));
        assert_eq!(entry_name(".visible .func probe()"), None);
        assert_eq!(entry_name(".visible .entryx probe()"), None);
        assert_eq!(entry_name("// .globl\tprobe"), None);
    }
}
