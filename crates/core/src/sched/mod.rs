//! Scalable scheduling building blocks for qdiscs with very many classes (issue 7), each with its
//! own tests, for the HTB (and others) to adopt.
//!
//! - [`wheel::TimerWheel`]: exact-deadline hierarchical timing wheel, O(1) insert/move/cancel.
//! - [`bitmap::RankSet`]: hierarchical bitmap with find-next-set, the HTB's rows and feeds.

pub mod wheel;
pub mod bitmap;
