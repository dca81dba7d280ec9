//! Refuses a `static mut` in a kernel crate: rustc compiles it into one array in *global*
//! memory, shared by every thread of the grid, not into per-block shared memory, which is what a
//! CUDA programmer who writes `__shared__ float tile[32][33]` means by it. The simulator can only
//! report it afterwards as a write "through a pointer in no buffer of the launch"; this check
//! says what to use instead before anything runs.
//!
//! A textual scan of the crate's `.rs` files under `src/`, comments, string and character
//! literals left out: `static mut` as two words.

use std::fs;
use std::path::{Path, PathBuf};

/// The message's advice, after the place.
const ADVICE: &str = "a `static mut` in a kernel crate is one array in global memory shared by every \
thread of the grid, not per-block shared memory. Declare shared memory in the kernel's attribute \
instead, with its element type and size: `#[kernel(shared(tile: Tile<f32, 32, 32, 1>, sums: \
Array<f32, 256>))]` (gpukern_device::shared), whose handles the kernel's body gets and whose bytes \
its launcher adds; or use `shared::dynamic` with the launch's `shared_mem_bytes`; or a buffer the \
host passes for data shared by the whole grid";

/// Fails naming the first `static mut` in the `.rs` files under `src` (`file:line: ...`).
pub fn refuse_static_mut(src: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        if let Some(line) = static_mut_line(&text) {
            return Err(format!("{}:{line}: {ADVICE}", file.display()));
        }
    }
    Ok(())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The line (from 1) of the first `static mut` of `text` outside comments and literals.
pub fn static_mut_line(text: &str) -> Option<usize> {
    let code = code_only(text);
    let words: Vec<(usize, &str)> = code
        .lines()
        .enumerate()
        .flat_map(|(n, l)| {
            l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(move |w| (n + 1, w))
        })
        .collect();
    words
        .windows(2)
        .find(|w| w[0].1 == "static" && w[1].1 == "mut")
        .map(|w| w[0].0)
}

/// `text` with comments and string and character literals blanked (newlines kept, so that line
/// numbers stay).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') closes within a few characters; a
            // lifetime ('a) does not.
            let close = (i + 2..(i + 12).min(chars.len()))
                .find(|&j| chars[j] == '\'' && (j == i + 2 || next == Some('\\')));
            match close {
                Some(j) => {
                    out.extend(std::iter::repeat_n(' ', j + 1 - i));
                    i = j + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_mut_is_found_with_its_line() {
        assert_eq!(
            static_mut_line("fn a() {}\nstatic mut TILE: [f32; 32] = [0.0; 32];\n"),
            Some(2)
        );
        assert_eq!(static_mut_line("pub static\n    mut X: u32 = 0;"), Some(1));
    }

    #[test]
    fn a_kernel_crate_with_a_static_mut_is_refused_naming_the_place_and_what_to_use() {
        let dir = std::env::temp_dir().join(format!("gpukern-static-mut-{}", std::process::id()));
        let src = dir.join("src");
        fs::create_dir_all(src.join("family")).unwrap();
        fs::write(src.join("lib.rs"), "pub mod family;\n").unwrap();
        fs::write(
            src.join("family/tile.rs"),
            "// a tile\nstatic mut TILE: [f32; 1024] = [0.0; 1024];\n",
        )
        .unwrap();
        let err = refuse_static_mut(&src).unwrap_err();
        fs::write(src.join("family/tile.rs"), "static TILE: [f32; 4] = [0.0; 4];\n").unwrap();
        let ok = refuse_static_mut(&src);
        let _ = fs::remove_dir_all(&dir);
        assert!(err.contains("family/tile.rs:2:"), "{err}");
        assert!(err.contains("#[kernel(shared("), "{err}");
        assert_eq!(ok, Ok(()));
    }

    #[test]
    fn comments_literals_and_other_statics_are_not_taken_for_one() {
        assert_eq!(static_mut_line("// static mut X: u32 = 0;\n"), None);
        assert_eq!(static_mut_line("/* a /* nested */ static mut */ fn f() {}"), None);
        assert_eq!(static_mut_line("const S: &str = \"static mut\";"), None);
        assert_eq!(static_mut_line("static MARKER: u8 = 0; let m = &mut x;"), None);
        assert_eq!(static_mut_line("let c = '\"'; static mut Y: u8 = 0;"), Some(1));
    }
}
