//! sluice-report (see README and DESIGN.md for its role).
