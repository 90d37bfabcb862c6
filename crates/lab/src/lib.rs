//! sluice-lab (see README and DESIGN.md for its role).
