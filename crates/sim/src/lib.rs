//! sluice-sim (see README and DESIGN.md for its role).
