//! kvlab's core kernels as a WebAssembly module for `benches/wasm.mjs`: the same code as the
//! native benchmark `benches/core.rs` (both build [`kernels`]), so that wasm in Chromium and
//! native are timed on the same kernels and inputs (`cargo xtask bench wasm`).
//!
//! JavaScript sees one class, `KernelBench`: `new KernelBench("W1")` builds a workload's inputs,
//! `KernelBench.kernels()` lists the kernels' names, `bench.run(i)` runs kernel `i` once and
//! returns its checksum. The timing is the script's (`performance.now()` around each call).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod kernels;

#[cfg(target_arch = "wasm32")]
mod web {
    use super::kernels::{Bench, KERNELS, WORKLOADS};
    use wasm_bindgen::prelude::*;

    /// One workload's inputs and kernels, for JavaScript.
    #[wasm_bindgen]
    pub struct KernelBench(Bench);

    #[wasm_bindgen]
    impl KernelBench {
        /// The inputs of workload `name` ("W1" or "W2").
        #[wasm_bindgen(constructor)]
        pub fn new(name: &str) -> Result<KernelBench, JsError> {
            let shape = *WORKLOADS
                .iter()
                .find(|w| w.name == name)
                .ok_or_else(|| JsError::new(&format!("no workload {name:?}: use W1 or W2")))?;
            Bench::new(shape)
                .map(KernelBench)
                .map_err(|e| JsError::new(&e))
        }

        /// The kernels' names, in the order `run` numbers them.
        pub fn kernels() -> Vec<String> {
            KERNELS.iter().map(|k| k.to_string()).collect()
        }

        /// Runs kernel `kernel` once; its checksum.
        pub fn run(&mut self, kernel: usize) -> Result<f64, JsError> {
            self.0.run(kernel).map_err(|e| JsError::new(&e))
        }

        /// Whether this module was compiled with simd128.
        pub fn simd() -> bool {
            cfg!(target_feature = "simd128")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kernels::{Bench, Shape, KERNELS, WORKLOADS};

    const SMALL: Shape = Shape {
        name: "small",
        steps: 40,
        tokens: 640,
        channels: 16,
    };

    #[test]
    fn fresh_and_reused_quantization_compute_the_same_and_reuse_changes_nothing() {
        let mut b = Bench::new(SMALL).unwrap();
        let fresh = b.run(0).unwrap();
        let reused = b.run(1).unwrap();
        assert_eq!(fresh.to_bits(), reused.to_bits());
        assert_eq!(b.run(1).unwrap().to_bits(), reused.to_bits());
        assert!(fresh.is_finite() && fresh != 0.0, "{fresh}");
    }

    #[test]
    fn selection_checksums_are_sums_of_budget_tokens_that_include_the_recent_window() {
        let mut b = Bench::new(SMALL).unwrap();
        let (t, budget, recent) = (SMALL.tokens, b.budget, b.recent);
        assert_eq!((budget, recent), (80, 20));
        // B distinct tokens among 0..T that include the last r: the sum lies between the recent
        // window plus the B - r smallest others and the B largest.
        let sum = |r: std::ops::Range<usize>| r.map(|i| i as f64).sum::<f64>();
        let least = sum(t - recent..t) + sum(0..budget - recent);
        let most = sum(t - budget..t);
        for kernel in [2, 3] {
            let c = b.run(kernel).unwrap();
            assert!(
                least <= c && c <= most,
                "{}: {c} not in {least}..={most}",
                KERNELS[kernel]
            );
            assert_eq!(c, c.trunc(), "{}", KERNELS[kernel]);
        }
        // heavy hitters are found: not just the window and the first tokens
        assert!(b.run(2).unwrap() > least);
    }

    #[test]
    fn a_kernel_out_of_range_is_an_error_naming_the_range() {
        let mut b = Bench::new(SMALL).unwrap();
        let e = b.run(KERNELS.len()).unwrap_err();
        assert_eq!(e, "no kernel 4: the kernels are 0..=3");
    }

    #[test]
    fn a_shape_the_generators_refuse_is_an_error_naming_it() {
        let e = Bench::new(Shape {
            name: "empty",
            steps: 0,
            tokens: 64,
            channels: 8,
        })
        .err()
        .unwrap();
        assert!(e.starts_with("attention 0 x 64"), "{e}");
    }

    #[test]
    fn the_workloads_are_the_issues() {
        let shapes: Vec<_> = WORKLOADS
            .iter()
            .map(|w| (w.name, w.steps, w.tokens, w.channels))
            .collect();
        assert_eq!(shapes, [("W1", 64, 4096, 128), ("W2", 64, 32_768, 128)]);
    }
}
