//! sluice-live (see README and DESIGN.md for its role).
