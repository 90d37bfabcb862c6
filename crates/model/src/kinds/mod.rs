//! Every kind's own code: its options, its tc words, how it shows, the kernel's rules for it,
//! its netlink attributes and how it is built.

pub mod cake;
pub mod ematch;
pub mod ets;
pub mod hfsc;
pub mod netem;
pub mod red;
