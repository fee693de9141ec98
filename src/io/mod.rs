//! Loaders (placeholder, being written).
