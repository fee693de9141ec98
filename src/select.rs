//! select (being written).
