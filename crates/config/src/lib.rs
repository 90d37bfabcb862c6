//! sluice-config (see README and DESIGN.md for its role).
