//! budget (being written).
