//! Scalable scheduling building blocks for qdiscs with very many classes (issue 7), each with its
//! own tests, for the HTB (and others) to adopt.
//!
//! - [`wheel::TimerWheel`]: exact-deadline hierarchical timing wheel, O(1) insert/move/cancel.
//! - [`bitmap::RankSet`]: hierarchical bitmap with find-next-set, the HTB's rows and feeds.
//! - [`slab::QueueSlab`]: many FIFO queues in one shared slab, the HTB leaves' and fq_codel's flows.
//! - [`FastMap`]: a hash map with a multiplicative hash, for keys that come from the configuration
//!   (class ids, handles, class configurations), not from packets, so a keyed hash buys nothing.

pub mod bitmap;
pub mod slab;
pub mod wheel;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative (Fibonacci) hash over 64-bit words; see [`FastMap`].
#[derive(Default)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64);
    }
    fn write_u16(&mut self, n: u16) {
        self.write_u64(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// A `HashMap` keyed by configuration data, hashed with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
