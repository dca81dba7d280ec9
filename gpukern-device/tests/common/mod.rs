//! Helpers shared by the simulator's test binaries: asserting a planted bug's exact report, and
//! naming a call site the way the simulator does.

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use gpukern_device::sim::SimError;

/// Asserts that a launch failed with exactly `expected`; prints the report's text.
#[track_caller]
pub fn assert_report(result: Result<(), SimError>, expected: SimError) {
    let err = result.expect_err("the simulator should have caught the planted bug");
    println!("{err}");
    assert_eq!(err, expected, "report text: {err}");
}

/// `file:line:column` of `call` on the line of `source` (the text of the test file `file`) that
/// ends with `marker`, as the simulator names a barrier or shuffle reached through that call.
pub fn site_in(source: &str, file: &str, call: &str, marker: &str) -> String {
    let (line, text) = source
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(call) && l.ends_with(marker))
        .unwrap_or_else(|| panic!("no line of {file} with {call} marked {marker:?}"));
    let column = text.find(call).unwrap_or(0);
    format!("{file}:{}:{}", line + 1, column + 1)
}
