//! Batched rtnetlink: many requests per `sendmsg`, every acknowledgement read and checked.
//!
//! The kernel processes each request of a `sendmsg` in turn and answers each with its own
//! `NLMSG_ERROR` (errno 0 is the ack, since every request asks for one; a message on an ack is a
//! warning, kept for [`Netlink::take_warnings`]). A chunk holds at most
//! [`MAX_MSGS`] requests and [`MAX_BYTES`] bytes, so that its acks fit the socket's receive buffer
//! (an ack that does not fit is dropped by the kernel, and a lost ack would be a lost answer).

use crate::netlink::{kernel_error, parse_ack, Msg, Netlink, NLMSG_ERROR_TYPE};
use crate::Error;
use std::collections::HashMap;

/// Requests per `sendmsg` at most.
pub const MAX_MSGS: usize = 128;
/// Bytes per `sendmsg` at most (below the default `wmem_default` of 208 KiB).
pub const MAX_BYTES: usize = 128 * 1024;

/// What became of a batch.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    /// Requests sent (all of them unless a chunk failed and `stop_on_error` was set).
    pub sent: usize,
    /// `sendmsg` calls made.
    pub sendmsgs: usize,
    /// Requests the kernel refused: (index in the input, its error).
    pub errors: Vec<(usize, Error)>,
}

impl BatchOutcome {
    /// Whether every request was sent and acknowledged.
    pub fn all_ok(&self, total: usize) -> bool {
        self.errors.is_empty() && self.sent == total
    }
}

/// Sends `msgs` in chunks and checks every acknowledgement. With `stop_on_error`, no chunk is
/// sent after one that had a refusal (the requests in that chunk after the refused one were
/// still processed by the kernel: it does not stop inside a `sendmsg`). I/O errors end the
/// batch with `Err`.
pub fn send(nl: &mut Netlink, msgs: &mut [Msg], stop_on_error: bool) -> Result<BatchOutcome, Error> {
    nl.set_rx_buffer(4 << 20);
    let mut out = BatchOutcome::default();
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_BYTES + 4096);
    let mut pending: HashMap<u32, usize> = HashMap::with_capacity(MAX_MSGS);
    let mut i = 0;
    while i < msgs.len() {
        buf.clear();
        pending.clear();
        while i < msgs.len() && pending.len() < MAX_MSGS {
            let len = msgs[i].bytes().len();
            if !buf.is_empty() && buf.len() + len > MAX_BYTES {
                break;
            }
            let seq = nl.next_seq();
            buf.extend_from_slice(msgs[i].finish(seq));
            pending.insert(seq, i);
            i += 1;
        }
        nl.send_raw(&buf)?;
        out.sendmsgs += 1;
        out.sent += pending.len();
        let mut failed = false;
        while !pending.is_empty() {
            for (ty, fl, seq, body) in nl.recv_seq()? {
                if ty != NLMSG_ERROR_TYPE {
                    continue;
                }
                if let Some(idx) = pending.remove(&seq) {
                    match parse_ack(fl, &body) {
                        (0, warning) if !warning.is_empty() => nl.warn(warning),
                        (0, _) => {}
                        (errno, message) => {
                            failed = true;
                            out.errors.push((idx, kernel_error(errno, message)));
                        }
                    }
                }
            }
        }
        if failed && stop_on_error {
            break;
        }
    }
    out.errors.sort_by_key(|(i, _)| *i);
    Ok(out)
}
