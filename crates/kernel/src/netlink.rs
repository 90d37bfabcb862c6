//! A small rtnetlink client for traffic control: build `tcmsg` requests with raw `TCA_*`
//! attributes, send them, and read acks and dumps. Only what the kernel backend needs.
//!
//! Wire format (all host byte order): `nlmsghdr` (16 bytes) · `tcmsg` (20 bytes) · attributes,
//! each `{u16 len, u16 type, payload, pad to 4}`. Nested attributes are attributes whose payload
//! is more attributes.

use crate::Error;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use sluice_model::nlattr::Attrs;

/// `RTM_NEWQDISC` and friends (linux/rtnetlink.h).
pub mod rtm {
    /// Create or change a qdisc.
    pub const NEWQDISC: u16 = 36;
    /// Delete a qdisc.
    pub const DELQDISC: u16 = 37;
    /// Get / dump qdiscs.
    pub const GETQDISC: u16 = 38;
    /// Create or change a class.
    pub const NEWTCLASS: u16 = 40;
    /// Delete a class.
    pub const DELTCLASS: u16 = 41;
    /// Get / dump classes.
    pub const GETTCLASS: u16 = 42;
    /// Create a filter.
    pub const NEWTFILTER: u16 = 44;
    /// Get / dump filters.
    pub const GETTFILTER: u16 = 46;
    /// Get one link (for the interface index).
    pub const GETLINK: u16 = 18;
}

/// `nlmsghdr.nlmsg_flags` bits.
pub mod flags {
    /// A request.
    pub const REQUEST: u16 = 0x1;
    /// Ask for an acknowledgement.
    pub const ACK: u16 = 0x4;
    /// Dump everything.
    pub const DUMP: u16 = 0x300;
    /// Replace an existing object.
    pub const REPLACE: u16 = 0x100;
    /// Fail if it exists.
    pub const EXCL: u16 = 0x200;
    /// Create if missing.
    pub const CREATE: u16 = 0x400;
}

const NLMSG_ERROR: u16 = 2;
/// `NLM_F_CAPPED` on an ack: the echoed request is only its header.
const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS` on an ack: extended-ack attributes follow the echoed request.
const NLM_F_ACK_TLVS: u16 = 0x200;
/// `NLMSGERR_ATTR_MSG`: the kernel's human-readable message.
const NLMSGERR_ATTR_MSG: u16 = 1;
const NLMSG_DONE: u16 = 3;

/// `TCA_*` attribute types of a tcmsg (linux/rtnetlink.h).
pub mod tca {
    /// Qdisc / class / filter kind string.
    pub const KIND: u16 = 1;
    /// Kind-specific options (nested).
    pub const OPTIONS: u16 = 2;
    /// Nested `TCA_STATS_*`.
    pub const STATS2: u16 = 7;
}

/// A request being built: header, tcmsg, then attributes appended in order (through the one
/// attribute writer, [`sluice_model::nlattr::Attrs`], which kinds encode their options with).
#[derive(Debug, Clone)]
pub struct Msg {
    a: Attrs,
}

/// The fixed `tcmsg` header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcMsg {
    /// Interface index.
    pub ifindex: i32,
    /// Object handle (`major << 16 | minor`).
    pub handle: u32,
    /// Parent handle (`TC_H_ROOT` = 0xFFFF_FFFF).
    pub parent: u32,
    /// Filters: `prio << 16 | protocol (network order)`.
    pub info: u32,
}

/// The root parent handle.
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// `TC_H_INGRESS`: the parent of ingress and clsact qdiscs.
pub const TC_H_INGRESS: u32 = 0xFFFF_FFF1;

impl Msg {
    /// A tc request of `kind` (an `rtm::*`) with `flags`.
    pub fn tc(kind: u16, flags: u16, tc: TcMsg) -> Msg {
        let mut buf = Vec::with_capacity(512);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched in finish()
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&flags.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // seq, set by the socket
        buf.extend_from_slice(&0u32.to_ne_bytes()); // port id
        buf.push(0); // AF_UNSPEC
        buf.extend_from_slice(&[0, 0, 0]);
        buf.extend_from_slice(&tc.ifindex.to_ne_bytes());
        buf.extend_from_slice(&tc.handle.to_ne_bytes());
        buf.extend_from_slice(&tc.parent.to_ne_bytes());
        buf.extend_from_slice(&tc.info.to_ne_bytes());
        Msg { a: Attrs::after(buf) }
    }

    /// A link request (`ifinfomsg`, 16 bytes) for a name lookup.
    pub fn getlink(name: &str) -> Msg {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&0u32.to_ne_bytes());
        buf.extend_from_slice(&rtm::GETLINK.to_ne_bytes());
        buf.extend_from_slice(&flags::REQUEST.to_ne_bytes());
        buf.extend_from_slice(&[0u8; 8]);
        buf.extend_from_slice(&[0u8; 16]);
        let mut m = Msg { a: Attrs::after(buf) };
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        m.attr(3, &n); // IFLA_IFNAME
        m
    }

    /// A finished request's bytes as a request again, for interface `ifindex` (the probe re-sends
    /// a request on a scratch device).
    pub fn from_bytes(bytes: &[u8], ifindex: i32) -> Msg {
        let mut buf = bytes.to_vec();
        if buf.len() >= 24 {
            buf[20..24].copy_from_slice(&ifindex.to_ne_bytes());
        }
        Msg { a: Attrs::after(buf) }
    }

    /// Set the tcmsg's parent (a request moved elsewhere in the tree).
    pub fn set_parent(&mut self, parent: u32) -> &mut Self {
        let buf = self.a.bytes_mut();
        if buf.len() >= 32 {
            buf[28..32].copy_from_slice(&parent.to_ne_bytes());
        }
        self
    }

    /// Append an attribute.
    pub fn attr(&mut self, ty: u16, payload: &[u8]) -> &mut Self {
        self.a.put(ty, payload);
        self
    }

    /// Append a NUL-terminated string attribute.
    pub fn attr_str(&mut self, ty: u16, s: &str) -> &mut Self {
        self.a.put_str(ty, s);
        self
    }

    /// Append bytes inside the current attribute (a fixed struct that leads an attribute's
    /// payload, as netem's `tc_netem_qopt` leads `TCA_OPTIONS`), padded to 4 bytes.
    pub fn raw(&mut self, payload: &[u8]) -> &mut Self {
        self.a.raw(payload);
        self
    }

    /// Open a nested attribute; close it with [`Msg::end_nest`].
    pub fn begin_nest(&mut self, ty: u16) -> &mut Self {
        self.a.begin_nest(ty);
        self
    }

    /// Close the innermost nested attribute.
    pub fn end_nest(&mut self) -> &mut Self {
        self.a.end_nest();
        self
    }

    /// The attribute writer, for a kind's encoder.
    pub fn attrs(&mut self) -> &mut Attrs {
        &mut self.a
    }

    /// The bytes built so far (length and sequence are filled in when sent).
    pub fn bytes(&self) -> &[u8] {
        self.a.bytes()
    }

    /// Fill in length and sequence number and give the wire bytes (for [`crate::batch`]).
    pub(crate) fn finish(&mut self, seq: u32) -> &[u8] {
        let buf = self.a.bytes_mut();
        let len = buf.len() as u32;
        buf[0..4].copy_from_slice(&len.to_ne_bytes());
        buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        buf
    }
}

/// One attribute seen in a reply.
#[derive(Debug, Clone, Copy)]
pub struct Attr<'a> {
    /// Attribute type (nested and byte-order flags stripped).
    pub ty: u16,
    /// Payload bytes.
    pub data: &'a [u8],
}

/// Iterate over the attributes in `buf`; stops quietly at the first malformed one (the one
/// reader, [`sluice_model::nlattr::attrs`]).
pub fn attrs(buf: &[u8]) -> impl Iterator<Item = Attr<'_>> {
    sluice_model::nlattr::attrs(buf).map(|(ty, data)| Attr { ty, data })
}

/// Find attribute `ty` in `buf`.
pub fn find(buf: &[u8], ty: u16) -> Option<&[u8]> {
    attrs(buf).find(|a| a.ty == ty).map(|a| a.data)
}

/// Read a native-endian u32 at `off`, if present.
pub fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4).map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Read a native-endian u64 at `off`, if present.
pub fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8).map(|s| {
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        u64::from_ne_bytes(a)
    })
}

/// A tc object from a dump: its header and raw attributes.
#[derive(Debug, Clone)]
pub struct TcObject {
    /// Message type (`rtm::NEWQDISC`, `rtm::NEWTCLASS`, ...).
    pub kind: u16,
    /// The tcmsg header.
    pub tc: TcMsg,
    /// Attribute bytes after the header.
    pub attrs: Vec<u8>,
}

impl TcObject {
    /// The `TCA_KIND` string.
    pub fn kind_str(&self) -> String {
        find(&self.attrs, tca::KIND)
            .map(|b| String::from_utf8_lossy(b).trim_end_matches('\0').to_string())
            .unwrap_or_default()
    }
    /// The `TCA_OPTIONS` payload.
    pub fn options(&self) -> &[u8] {
        find(&self.attrs, tca::OPTIONS).unwrap_or(&[])
    }
}

/// A received message: (type, flags, sequence, body after the header).
pub(crate) type Received = (u16, u16, u32, Vec<u8>);

/// An rtnetlink socket in the calling thread's network namespace.
pub struct Netlink {
    sock: Socket,
    seq: u32,
    warnings: Vec<String>,
    /// The receive buffer, reused by every recv (a dump of a large tree is hundreds of them).
    rx: Vec<u8>,
}

/// Bytes per recv: a dump's replies come one skb (at most 32 KiB) per recv.
const RX_BYTES: usize = 64 * 1024;

impl Netlink {
    /// Open and bind.
    pub fn open() -> Result<Netlink, Error> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(Error::Io)?;
        sock.bind_auto().map_err(Error::Io)?;
        // Extended acks carry the kernel's own explanation ("quantum of class ... is big").
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        sock.connect(&SocketAddr::new(0, 0)).map_err(Error::Io)?;
        Ok(Netlink { sock, seq: 1, warnings: Vec::new(), rx: vec![0u8; RX_BYTES] })
    }

    /// Send a request that expects an ack; a kernel error becomes [`Error::Kernel`] with the
    /// errno and the kernel's extended-ack message when it gives one. A message on a successful
    /// ack (a warning such as HTB's "quantum of class 10001 is big. Consider r2q change.") is kept
    /// for [`Netlink::take_warnings`].
    pub fn request(&mut self, msg: &mut Msg) -> Result<(), Error> {
        self.seq += 1;
        let seq = self.seq;
        self.sock.send(msg.finish(seq), 0).map_err(Error::Io)?;
        loop {
            for (ty, fl, body) in self.recv_batch()? {
                if ty == NLMSG_ERROR {
                    let (errno, message) = parse_ack(fl, &body);
                    if errno == 0 {
                        if !message.is_empty() {
                            self.warnings.push(message);
                        }
                        return Ok(());
                    }
                    return Err(kernel_error(errno, message));
                }
            }
        }
    }

    /// The kernel's warnings (extended-ack messages on successful acks) since the last call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Send a dump request and collect every reply object.
    pub fn dump(&mut self, msg: &mut Msg) -> Result<Vec<TcObject>, Error> {
        let mut out = Vec::new();
        self.dump_each(msg, |kind, tc, attrs| out.push(TcObject { kind, tc, attrs: attrs.to_vec() }))?;
        Ok(out)
    }

    /// Send a dump request and call `f` on each reply object (message type, tcmsg header,
    /// attribute bytes) straight from the receive buffer, without copying it.
    pub fn dump_each(&mut self, msg: &mut Msg, mut f: impl FnMut(u16, TcMsg, &[u8])) -> Result<(), Error> {
        self.seq += 1;
        let seq = self.seq;
        self.sock.send(msg.finish(seq), 0).map_err(Error::Io)?;
        loop {
            let n = self.recv_into()?;
            let mut end = None;
            for_each_msg(&self.rx[..n], |ty, fl, _, body| match ty {
                NLMSG_DONE => end = Some(Ok(())),
                NLMSG_ERROR => {
                    end = Some(match parse_ack(fl, body) {
                        (0, _) => Ok(()),
                        (errno, message) => Err(kernel_error(errno, message)),
                    })
                }
                _ if end.is_none() && body.len() >= 20 => f(
                    ty,
                    TcMsg {
                        ifindex: i32::from_ne_bytes([body[4], body[5], body[6], body[7]]),
                        handle: u32_at(body, 8).unwrap_or(0),
                        parent: u32_at(body, 12).unwrap_or(0),
                        info: u32_at(body, 16).unwrap_or(0),
                    },
                    &body[20..],
                ),
                _ => {}
            });
            if let Some(r) = end {
                return r;
            }
        }
    }

    /// The index of interface `name` in this namespace.
    pub fn ifindex(&mut self, name: &str) -> Result<i32, Error> {
        self.seq += 1;
        let seq = self.seq;
        let mut m = Msg::getlink(name);
        self.sock.send(m.finish(seq), 0).map_err(Error::Io)?;
        loop {
            for (ty, fl, body) in self.recv_batch()? {
                if ty == NLMSG_ERROR {
                    return Err(match parse_ack(fl, &body) {
                        (0 | 19, _) => Error::NoDevice(name.to_string()),
                        (errno, message) => kernel_error(errno, message),
                    });
                }
                if ty == 16 && body.len() >= 8 {
                    return Ok(i32::from_ne_bytes([body[4], body[5], body[6], body[7]]));
                }
            }
        }
    }

    /// One recv: the (type, flags, body-after-header) of each message in it.
    fn recv_batch(&mut self) -> Result<Vec<(u16, u16, Vec<u8>)>, Error> {
        Ok(self.recv_seq()?.into_iter().map(|(ty, fl, _, body)| (ty, fl, body)).collect())
    }

    /// A fresh sequence number (for [`crate::batch`]).
    pub(crate) fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Send bytes holding one or more finished requests in one `sendmsg` (for [`crate::batch`]).
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.sock.send(bytes, 0).map_err(Error::Io).map(|_| ())
    }

    /// Ask for a receive buffer of `bytes` (best effort: the kernel caps it at `rmem_max`).
    pub(crate) fn set_rx_buffer(&mut self, bytes: usize) {
        let _ = self.sock.set_rx_buf_sz(bytes);
    }

    /// Keep a kernel warning for [`Netlink::take_warnings`] (for [`crate::batch`]).
    pub(crate) fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// One recv: the (type, flags, sequence, body-after-header) of each message in it.
    pub(crate) fn recv_seq(&mut self) -> Result<Vec<Received>, Error> {
        let n = self.recv_into()?;
        let mut out = Vec::new();
        for_each_msg(&self.rx[..n], |ty, fl, seq, body| out.push((ty, fl, seq, body.to_vec())));
        Ok(out)
    }

    /// One recv into the reused buffer; the bytes received.
    fn recv_into(&mut self) -> Result<usize, Error> {
        self.rx.resize(RX_BYTES, 0);
        self.sock.recv(&mut &mut self.rx[..], 0).map_err(Error::Io)
    }
}

/// Calls `f` on the (type, flags, sequence, body after the header) of each whole message in
/// `buf`; stops at the first malformed one.
fn for_each_msg(buf: &[u8], mut f: impl FnMut(u16, u16, u32, &[u8])) {
    let mut off = 0;
    while off + 16 <= buf.len() {
        let len = u32_at(buf, off).unwrap_or(0) as usize;
        if len < 16 || off + len > buf.len() {
            break;
        }
        let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
        let fl = u16::from_ne_bytes([buf[off + 6], buf[off + 7]]);
        let seq = u32_at(buf, off + 8).unwrap_or(0);
        f(ty, fl, seq, &buf[off + 16..off + len]);
        off += (len + 3) & !3;
    }
}

/// `NLMSG_ERROR`: an ack (errno 0) or an error.
pub(crate) const NLMSG_ERROR_TYPE: u16 = NLMSG_ERROR;

/// Decode an `NLMSG_ERROR` body (`flags` from its header): the positive errno (0 for an ack) and
/// the extended-ack message (`NLMSGERR_ATTR_MSG`), empty when the kernel gave none. The
/// attributes follow the echoed request: its header alone with `NLM_F_CAPPED`, else all of it.
pub(crate) fn parse_ack(flags: u16, body: &[u8]) -> (i32, String) {
    let errno = u32_at(body, 0).map(|e| (e as i32).wrapping_neg()).unwrap_or(EIO);
    let mut msg = String::new();
    if flags & NLM_F_ACK_TLVS != 0 {
        let echoed = if flags & NLM_F_CAPPED != 0 { 16 } else { u32_at(body, 4).unwrap_or(16) as usize };
        let start = 4 + ((echoed + 3) & !3);
        if let Some(m) = body.get(start..).and_then(|t| find(t, NLMSGERR_ATTR_MSG)) {
            msg = String::from_utf8_lossy(m).trim_end_matches('\0').to_string();
        }
    }
    (errno, msg)
}

/// EIO, for an error message too short to hold its errno.
const EIO: i32 = 5;

pub(crate) fn kernel_error(errno: i32, message: String) -> Error {
    // std's text ends in " (os error N)"; the messages print the errno themselves.
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let strerror = text.strip_suffix(&format!(" (os error {errno})")).unwrap_or(&text).to_string();
    Error::Kernel { errno, message, strerror }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_with_nesting_and_padding() {
        let mut m = Msg::tc(
            rtm::NEWQDISC,
            flags::REQUEST,
            TcMsg { ifindex: 3, handle: 1 << 16, parent: TC_H_ROOT, info: 0 },
        );
        m.attr_str(tca::KIND, "htb");
        m.begin_nest(tca::OPTIONS);
        m.attr(2, &[1, 2, 3, 4, 5]);
        m.attr(5, &7u32.to_ne_bytes());
        m.end_nest();
        let bytes = m.finish(9).to_vec();
        assert_eq!(u32_at(&bytes, 0).unwrap() as usize, bytes.len());
        assert_eq!(u32_at(&bytes, 8), Some(9));
        let a = &bytes[36..];
        assert_eq!(find(a, tca::KIND), Some(&b"htb\0"[..]));
        let opts = find(a, tca::OPTIONS).unwrap();
        assert_eq!(find(opts, 2), Some(&[1u8, 2, 3, 4, 5][..]));
        assert_eq!(find(opts, 5).and_then(|b| u32_at(b, 0)), Some(7));
    }

    /// An `NLMSG_ERROR` body: errno, the echoed request (`echo` bytes), then a message TLV.
    fn ack(errno: i32, echo: usize, msg: &str) -> Vec<u8> {
        let mut b = errno.to_ne_bytes().to_vec();
        let mut hdr = vec![0u8; echo.max(16)];
        hdr[0..4].copy_from_slice(&(echo.max(16) as u32).to_ne_bytes());
        b.extend_from_slice(&hdr);
        let mut m = Msg { a: Attrs::new() };
        m.attr_str(NLMSGERR_ATTR_MSG, msg);
        b.extend_from_slice(m.bytes());
        b
    }

    #[test]
    fn acks_carry_warnings_and_errors_their_message() {
        let warn = "quantum of class 10001 is big. Consider r2q change.";
        assert_eq!(parse_ack(NLM_F_CAPPED | NLM_F_ACK_TLVS, &ack(0, 16, warn)), (0, warn.to_string()));
        // Uncapped: the whole request (here 36 bytes) is echoed before the attributes.
        assert_eq!(parse_ack(NLM_F_ACK_TLVS, &ack(-22, 36, "Invalid")), (22, "Invalid".to_string()));
        // Without NLM_F_ACK_TLVS there is no message, whatever follows.
        assert_eq!(parse_ack(NLM_F_CAPPED, &ack(0, 16, warn)), (0, String::new()));
        assert_eq!(parse_ack(NLM_F_ACK_TLVS, &[1, 2]), (EIO, String::new()));
    }

    #[test]
    fn truncated_attributes_stop_without_panicking() {
        let junk = [8u8, 0, 1, 0, 1, 2];
        assert_eq!(attrs(&junk).count(), 0);
        assert_eq!(attrs(&[]).count(), 0);
        assert_eq!(attrs(&[2, 0, 0, 0]).count(), 0);
    }
}
