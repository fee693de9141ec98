//! Shared by the fuzz targets: small limits (so a run explores parsing, not allocation) and the
//! invariants every loaded tensor must hold.

use kvlab::io::{self, HeadPick, KvPick, Limits, Tensor};

/// 1 MiB files, 256 Ki elements.
pub const LIMITS: Limits = Limits {
    max_bytes: 1 << 20,
    max_elements: 1 << 18,
};

/// Non-empty, rank <= 4, finite, `len == product(shape)`; interpreting it never panics.
pub fn check(t: &Tensor) {
    assert!(!t.is_empty());
    assert!(t.rank() <= io::MAX_RANK);
    assert_eq!(t.shape().iter().product::<usize>(), t.len());
    assert!(t.data().iter().all(|v| v.is_finite()));
    for pick in [HeadPick::Mean, HeadPick::Max, HeadPick::Head(1)] {
        if let Ok(mut v) = io::interpret_attention("a", t, pick) {
            let _ = io::normalise_rows(&mut v.matrix);
        }
    }
    let _ = io::interpret_kv("k", t, KvPick { layer: 1, head: 0 });
}

/// Runs the format-dispatching loader under `name` and checks what it returns.
pub fn load_all(name: &str, data: &[u8]) {
    if let Ok(file) = io::load(name, data, &LIMITS) {
        assert!(!file.tensors.is_empty());
        for t in &file.tensors {
            check(&t.tensor);
        }
    }
}
