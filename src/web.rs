//! Browser driver (placeholder).
