//! store (placeholder)
