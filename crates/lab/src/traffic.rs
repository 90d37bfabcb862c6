//! Built-in traffic (placeholder, filled in next).
