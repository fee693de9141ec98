//! Charts (placeholder, being written).
