//! sluice-wire (see README and DESIGN.md for its role).
