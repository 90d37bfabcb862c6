//! Scalable scheduling building blocks for qdiscs with very many classes (issue 7), each with its
//! own tests, for the HTB (and others) to adopt.
//!
//! - [`wheel::TimerWheel`]: exact-deadline hierarchical timing wheel, O(1) insert/move/cancel.
//! - [`bitmap::RankSet`]: hierarchical bitmap with find-next-set, the HTB's rows and feeds.
//! - [`slab::QueueSlab`]: many FIFO queues in one shared slab, the HTB leaves' and fq_codel's flows.

pub mod bitmap;
pub mod slab;
pub mod wheel;
