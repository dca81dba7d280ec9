//! What [`crate::print!`] does in the simulator: the text goes to the process's stdout at once,
//! as one write (CUDA prints at the next synchronisation; either way one call's text is never
//! split), and to the launch's [`Output`] when a test asked for one.

use std::sync::{Arc, Mutex};

use super::block::BlockState;
use super::Dim3;

/// The text of one `print!` call and the thread that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Printed {
    /// The block's index in the grid.
    pub block: Dim3,
    /// The thread's index in its block.
    pub thread: Dim3,
    /// What the call printed.
    pub text: String,
}

/// The `print!` output of one launch, from [`super::Launch::capture_output`]; read it after
/// [`super::Launch::run`].
///
/// Calls are kept in the order they ran: within a block, thread by thread between two barriers
/// (the simulator's schedule); across blocks, in whatever order the OS threads ran them, so a
/// test should compare lines of different blocks without regard to order.
#[derive(Clone, Debug, Default)]
pub struct Output(Arc<Mutex<Vec<Printed>>>);

impl Output {
    /// Every `print!` call of the launch, in the order they ran.
    pub fn records(&self) -> Vec<Printed> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// All the text, in the order it was printed.
    pub fn text(&self) -> String {
        self.records().into_iter().map(|p| p.text).collect()
    }

    /// The text split into lines (without their `\n`).
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(str::to_string).collect()
    }

    fn push(&self, printed: Printed) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(printed);
    }
}

/// Prints `text` for the running thread of `state`'s block.
pub(super) fn emit(state: &BlockState<'_>, text: String) {
    // `print!` takes stdout's lock for the whole text (and goes to the test harness's capture
    // when there is one, which the simulator's worker threads inherit).
    std::print!("{text}");
    if let Some(output) = &state.info.output {
        output.push(Printed {
            block: state.block_idx,
            thread: state.thread_dim(state.current.get()),
            text,
        });
    }
}
