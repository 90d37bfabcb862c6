//! Netlink attributes (`struct nlattr`: length, type, payload, padded to 4 bytes), written and
//! read. The one attribute writer: every kind's encoder and the kernel crate's requests use it.

/// `NLA_F_NESTED`: set on nests whose sender marks them (tc does for some kinds).
pub const NLA_F_NESTED: u16 = 0x8000;
/// The type bits of `nla_type` (without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`).
pub const NLA_TYPE_MASK: u16 = 0x3FFF;

/// Bytes being written: whatever fixed header the caller put first, then attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl Attrs {
    /// Attributes from the start.
    pub fn new() -> Attrs {
        Attrs::default()
    }

    /// Attributes after `header` (a netlink message's fixed part, already in `header`).
    pub fn after(header: Vec<u8>) -> Attrs {
        Attrs { buf: header, nests: Vec::new() }
    }

    /// One attribute.
    pub fn put(&mut self, ty: u16, payload: &[u8]) -> &mut Self {
        let len = 4 + payload.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(payload);
        self.pad();
        self
    }

    /// A `u8` attribute.
    pub fn put_u8(&mut self, ty: u16, v: u8) -> &mut Self {
        self.put(ty, &[v])
    }

    /// A `u16` attribute (host order).
    pub fn put_u16(&mut self, ty: u16, v: u16) -> &mut Self {
        self.put(ty, &v.to_ne_bytes())
    }

    /// A `u32` attribute (host order).
    pub fn put_u32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.put(ty, &v.to_ne_bytes())
    }

    /// A `u64` attribute (host order).
    pub fn put_u64(&mut self, ty: u16, v: u64) -> &mut Self {
        self.put(ty, &v.to_ne_bytes())
    }

    /// A string attribute with its terminating NUL.
    pub fn put_str(&mut self, ty: u16, s: &str) -> &mut Self {
        let mut b = Vec::with_capacity(s.len() + 1);
        b.extend_from_slice(s.as_bytes());
        b.push(0);
        self.put(ty, &b)
    }

    /// A flag attribute (no payload).
    pub fn put_flag(&mut self, ty: u16) -> &mut Self {
        self.put(ty, &[])
    }

    /// Bytes with no attribute header (a struct some kinds put at the head of a nest), padded.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self.pad();
        self
    }

    /// Opens a nest of type `ty`; [`Attrs::end_nest`] closes it.
    pub fn begin_nest(&mut self, ty: u16) -> &mut Self {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self
    }

    /// Closes the innermost open nest (its length then covers what was written since).
    pub fn end_nest(&mut self) -> &mut Self {
        if let Some(at) = self.nests.pop() {
            let len = (self.buf.len() - at) as u16;
            self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    /// The bytes written so far (with any header given to [`Attrs::after`]).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes written so far, mutable (a caller patching its own header).
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }
}

/// The attributes in `buf`: `(type without flags, payload)`, in order. Stops at the first
/// malformed header (a dump is read, never trusted).
pub fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let head = buf.get(at..at + 4)?;
        let len = u16::from_ne_bytes([head[0], head[1]]) as usize;
        let ty = u16::from_ne_bytes([head[2], head[3]]) & NLA_TYPE_MASK;
        let payload = buf.get(at + 4..at.checked_add(len)?)?;
        if len < 4 {
            return None;
        }
        at += (len + 3) & !3;
        Some((ty, payload))
    })
}

/// The payload of the first attribute of type `ty` in `buf`.
pub fn find(buf: &[u8], ty: u16) -> Option<&[u8]> {
    attrs(buf).find(|(t, _)| *t == ty).map(|(_, p)| p)
}

/// A `u32` payload (host order), if it is at least 4 bytes.
pub fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(..4)?.try_into().ok()?))
}

/// A `u64` payload (host order), if it is at least 8 bytes.
pub fn u64_of(p: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(p.get(..8)?.try_into().ok()?))
}

/// `n` host-order `u32`s from the start of `p`, if it holds them.
pub fn u32s<const N: usize>(p: &[u8]) -> Option<[u32; N]> {
    let mut out = [0u32; N];
    for (i, v) in out.iter_mut().enumerate() {
        *v = u32_of(p.get(i * 4..)?)?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nests_and_padding_read_back() {
        let mut a = Attrs::new();
        a.put_str(1, "fq_codel").begin_nest(2).put_u32(1, 1001).put_flag(4).put_u8(9, 7).end_nest();
        let b = a.into_bytes();
        assert_eq!(b.len() % 4, 0);
        let top: Vec<_> = attrs(&b).collect();
        assert_eq!(top.len(), 2);
        assert_eq!(top[0], (1, &b"fq_codel\0"[..]));
        let inner: Vec<_> = attrs(top[1].1).map(|(t, p)| (t, p.to_vec())).collect();
        assert_eq!(inner, vec![(1, 1001u32.to_ne_bytes().to_vec()), (4, vec![]), (9, vec![7])]);
    }

    #[test]
    fn malformed_headers_end_the_walk() {
        assert_eq!(attrs(&[8, 0, 1, 0, 1]).count(), 0);
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0);
    }
}
