//! What a failed tc command reports: tc's exit status, its stderr text, and the argument at fault.

use std::fmt;

/// A tc command that failed. `code` follows iproute2: 1 for option parsing errors ("What is ..."),
/// 2 when the kernel refused the request, 255 for `invarg`/`duparg` (tc calls `exit(-1)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcError {
    /// Process exit status tc would return.
    pub code: u8,
    /// The stderr text, as tc prints it (may span lines).
    pub message: String,
    /// Index of the offending argument in the command's argv, when known (for line:column).
    pub arg: Option<usize>,
}

impl TcError {
    /// An option-parsing error (exit 1).
    pub fn usage(message: impl Into<String>, arg: Option<usize>) -> TcError {
        TcError { code: 1, message: message.into(), arg }
    }
    /// `invarg`: `Error: argument "X" is wrong: MSG` (exit 255).
    pub fn invarg(msg: &str, value: &str, arg: usize) -> TcError {
        TcError { code: 255, message: format!("Error: argument \"{value}\" is wrong: {msg}"), arg: Some(arg) }
    }
    /// `duparg` (exit 255).
    pub fn duparg(key: &str, value: &str, arg: usize) -> TcError {
        TcError {
            code: 255,
            message: format!("Error: duplicate \"{key}\": \"{value}\" is the second value."),
            arg: Some(arg),
        }
    }
    /// The kernel refused with an extack message: `Error: MSG.` (exit 2).
    pub fn kernel(msg: &str) -> TcError {
        TcError { code: 2, message: format!("Error: {msg}."), arg: None }
    }
    /// The kernel refused without extack: `RTNETLINK answers: ERRNO` (exit 2).
    pub fn errno(errno_text: &str) -> TcError {
        TcError { code: 2, message: format!("RTNETLINK answers: {errno_text}"), arg: None }
    }
    /// Exit 255 with a message (tc functions returning -1 from `main`).
    pub fn fatal(message: impl Into<String>, arg: Option<usize>) -> TcError {
        TcError { code: 255, message: message.into(), arg }
    }
}

impl fmt::Display for TcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TcError {}
