//! `#[kernel(launch_bounds(MAX_THREADS, MIN_BLOCKS))]`: CUDA's `__launch_bounds__` for a Rust
//! kernel.
//!
//! rustc has no launch-bounds attribute and writes neither `.maxntid` nor `.minnctapersm` into
//! the PTX. So the kernel's PTX entry carries a marker instead: a `#[used]` `#[no_mangle]` byte
//! declared inside its body (so that it exists exactly when the entry does, whatever `cfg` the
//! kernel sits under), named `__gpukern_bounds_<max>_<min>_<kernel>`. `gpukern-build` finds the
//! marker in the PTX, writes `.maxntid <max>, 1, 1` and `.minnctapersm <min>` into the entry's
//! header and drops the marker. On the host the launcher module carries the bounds, and a launch
//! of more threads per block than `<max>` is refused before it reaches the driver.

/// The prefix of a marker's name; `gpukern-build` looks for the same text.
pub const MARKER_PREFIX: &str = "__gpukern_bounds_";

/// Most threads in a CUDA block.
const MAX_BLOCK_THREADS: u32 = 1024;

/// A kernel's launch bounds: at most `max_threads` threads per block, and registers few enough
/// that `min_blocks` blocks of that size fit on one multiprocessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub max_threads: u32,
    pub min_blocks: u32,
}

impl Bounds {
    /// The name of the marker static of kernel `kernel`.
    pub fn marker(&self, kernel: &str) -> String {
        format!("{MARKER_PREFIX}{}_{}_{kernel}", self.max_threads, self.min_blocks)
    }
}

/// The attribute's arguments as text (`TokenStream`'s `Display`, spacing ignored): empty ->
/// `None`; `launch_bounds(384)` or `launch_bounds(384, 1)` -> the bounds; anything else -> a
/// message for `compile_error!`.
pub fn parse(attr: &str) -> Result<Option<Bounds>, String> {
    let text: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    if text.is_empty() {
        return Ok(None);
    }
    const USAGE: &str = "#[kernel] takes no arguments or `launch_bounds(MAX_THREADS)` or \
                         `launch_bounds(MAX_THREADS, MIN_BLOCKS)`, e.g. `#[kernel(launch_bounds(384, 1))]`";
    let Some(args) = text
        .strip_prefix("launch_bounds(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return Err(format!("{USAGE}; found `{attr}`"));
    };
    let args: Vec<&str> = args.strip_suffix(',').unwrap_or(args).split(',').collect();
    let number = |what: &str, arg: &str| -> Result<u32, String> {
        let digits = arg.strip_suffix("u32").unwrap_or(arg).replace('_', "");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "#[kernel(launch_bounds(..))]: {what} must be an integer literal, found `{arg}`"
            ));
        }
        digits
            .parse::<u32>()
            .map_err(|_| format!("#[kernel(launch_bounds(..))]: {what} `{arg}` is too large"))
    };
    let (max_threads, min_blocks) = match args.as_slice() {
        [max] => (number("MAX_THREADS", max)?, 1),
        [max, min] => (number("MAX_THREADS", max)?, number("MIN_BLOCKS", min)?),
        _ => return Err(format!("{USAGE}; found `{attr}`")),
    };
    if !(1..=MAX_BLOCK_THREADS).contains(&max_threads) {
        return Err(format!(
            "#[kernel(launch_bounds(..))]: MAX_THREADS (threads per block) must be 1..={MAX_BLOCK_THREADS}, \
             found {max_threads}"
        ));
    }
    if min_blocks == 0 {
        return Err(
            "#[kernel(launch_bounds(..))]: MIN_BLOCKS (blocks per multiprocessor) must be at least 1".into(),
        );
    }
    Ok(Some(Bounds {
        max_threads,
        min_blocks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_threads: u32, min_blocks: u32) -> Result<Option<Bounds>, String> {
        Ok(Some(Bounds {
            max_threads,
            min_blocks,
        }))
    }

    #[test]
    fn bounds_are_parsed_with_any_spacing() {
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse("launch_bounds(384, 1)"), bounds(384, 1));
        assert_eq!(parse("launch_bounds (384 , 2 ,)"), bounds(384, 2));
        assert_eq!(parse("launch_bounds(1_024u32)"), bounds(1024, 1));
        assert_eq!(parse("launch_bounds(1)"), bounds(1, 1));
    }

    #[test]
    fn bad_bounds_say_what_is_wrong() {
        let error = |attr: &str| parse(attr).err().unwrap_or_default();
        assert!(error("bounds(384)").contains("takes no arguments or"));
        assert!(error("launch_bounds()").contains("must be an integer literal"));
        assert!(error("launch_bounds(384, 1, 1)").contains("takes no arguments or"));
        assert!(error("launch_bounds(N, 1)").contains("MAX_THREADS must be an integer literal"));
        assert!(error("launch_bounds(384, -1)").contains("MIN_BLOCKS must be an integer literal"));
        assert!(error("launch_bounds(384.0)").contains("integer literal"));
        assert!(error("launch_bounds(0)").contains("1..=1024"));
        assert!(error("launch_bounds(1025, 1)").contains("1..=1024"));
        assert!(error("launch_bounds(99999999999)").contains("too large"));
        assert!(error("launch_bounds(384, 0)").contains("at least 1"));
    }

    #[test]
    fn the_marker_names_the_bounds_then_the_kernel() {
        let b = Bounds {
            max_threads: 384,
            min_blocks: 1,
        };
        assert_eq!(b.marker("my_kernel"), "__gpukern_bounds_384_1_my_kernel");
    }
}
