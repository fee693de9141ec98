//! quant (being written).
