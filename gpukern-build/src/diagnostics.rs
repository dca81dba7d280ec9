//! What a failed nested PTX build says to the user: rustc's errors, once, without cargo's status
//! lines, warnings or closing summaries, and one report for every architecture that failed the
//! same way.

/// rustc's error diagnostics in a nested build's stderr (cargo run with `--quiet`): each block
/// that starts with `error` at the start of a line, up to the next diagnostic; warnings (the
/// user's, which the host build shows too, and any from gpukern's own crates) and cargo's
/// closing `error: could not compile ..` line are dropped. Falls back to the whole text when no
/// block is found (a cargo error that is not rustc's: a missing toolchain, a bad manifest).
pub fn errors(stderr: &str) -> String {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut keep = false;
    for line in stderr.lines() {
        let starts_diagnostic = line.starts_with("error") || line.starts_with("warning");
        if starts_diagnostic {
            keep = line.starts_with("error") && !is_summary(line);
            if keep {
                blocks.push(Vec::new());
            }
        }
        if keep && let Some(block) = blocks.last_mut() {
            block.push(line);
        }
    }
    if blocks.is_empty() {
        return stderr.trim_end().to_string();
    }
    blocks
        .iter()
        .map(|b| b.join("\n").trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// cargo's and rustc's closing lines, which add nothing to the errors above them.
fn is_summary(line: &str) -> bool {
    line.starts_with("error: could not compile")
        || line.starts_with("error: aborting due to")
        || line.starts_with("error: build failed")
}

/// One report per distinct error text, naming the architectures that gave it: a kernel that does
/// not compile fails every architecture the same way, and is shown once.
pub fn merge(failures: &[(String, String)]) -> String {
    let mut distinct: Vec<(Vec<&str>, &str)> = Vec::new();
    for (arch, text) in failures {
        match distinct.iter_mut().find(|(_, t)| *t == text.as_str()) {
            Some((archs, _)) => archs.push(arch),
            None => distinct.push((vec![arch.as_str()], text.as_str())),
        }
    }
    distinct
        .iter()
        .map(|(archs, text)| format!("(PTX for {})\n{text}", archs.join(", ")))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NESTED: &str = "\
warning: the feature `abi_ptx` is declared but not used
 --> gpukern-device/src/lib.rs:42:9
  |
  = note: `#[warn(unused_features)]` on by default

error[E0277]: cannot add `u32` to `f32`
  --> kernels/src/lib.rs:30:41
   |
30 |         unsafe { mem::store(x, i, mem::load(x, i) + 1u32) }
   |                                                   ^ no implementation for `f32 + u32`

warning: unused variable: `j`
 --> kernels/src/lib.rs:31:9

error: aborting due to 1 previous error; 1 warning emitted

For more information about this error, try `rustc --explain E0277`.
error: could not compile `kernels` (lib) due to 1 previous error; 1 warning emitted
";

    #[test]
    fn only_rustc_errors_are_kept() {
        let kept = errors(NESTED);
        assert!(
            kept.starts_with("error[E0277]: cannot add `u32` to `f32`"),
            "{kept}"
        );
        assert!(kept.contains("--> kernels/src/lib.rs:30:41"), "{kept}");
        assert!(!kept.contains("warning"), "{kept}");
        assert!(!kept.contains("could not compile"), "{kept}");
        assert!(!kept.contains("aborting"), "{kept}");
        assert_eq!(kept.matches("error").count(), 1, "{kept}");
    }

    #[test]
    fn a_failure_that_is_not_rustc_s_is_shown_whole() {
        let text = "error: failed to parse manifest at `/x/Cargo.toml`\n\nCaused by:\n  bad";
        // cargo's own error is kept (it is not a closing summary line).
        assert!(errors(text).contains("Caused by"));
        assert_eq!(errors("toolchain missing\n"), "toolchain missing");
    }

    #[test]
    fn the_same_error_of_several_architectures_is_reported_once() {
        let e = errors(NESTED);
        let merged = merge(&[("sm_80".into(), e.clone()), ("sm_90".into(), e.clone())]);
        assert_eq!(merged.matches("error[E0277]").count(), 1, "{merged}");
        assert!(merged.starts_with("(PTX for sm_80, sm_90)"), "{merged}");
        let other = merge(&[
            ("sm_80".into(), e.clone()),
            ("sm_90a".into(), "error: other".into()),
        ]);
        assert_eq!(other.matches("(PTX for").count(), 2, "{other}");
    }
}
