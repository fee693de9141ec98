//! AdamW over the flat parameter buffer, step for step candle-nn 0.11's `AdamW` (the first
//! trainer's optimizer): bias-corrected moments, decoupled weight decay on every parameter.

/// The optimizer's settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// The first trainer's: beta2 0.99, weight decay 0.05.
    fn default() -> Self {
        AdamWConfig {
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.05,
        }
    }
}

/// The optimizer's state: both moments and the steps taken.
#[derive(Debug, Clone, PartialEq)]
pub struct AdamW {
    pub config: AdamWConfig,
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    pub steps: u64,
}

impl AdamW {
    /// Zero moments for `len` parameters.
    pub fn new(config: AdamWConfig, len: usize) -> AdamW {
        AdamW {
            config,
            m: vec![0.0; len],
            v: vec![0.0; len],
            steps: 0,
        }
    }

    /// One step at learning rate `lr`: `theta = theta (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps)`.
    pub fn step(&mut self, params: &mut [f32], grad: &[f32], lr: f64) {
        let c = self.config;
        self.steps += 1;
        let t = self.steps as i32;
        let scale_m = (1.0 / (1.0 - c.beta1.powi(t))) as f32;
        let scale_v = (1.0 / (1.0 - c.beta2.powi(t))) as f32;
        let (b1, b2) = (c.beta1 as f32, c.beta2 as f32);
        let (one_b1, one_b2) = ((1.0 - c.beta1) as f32, (1.0 - c.beta2) as f32);
        let decay = (1.0 - lr * c.weight_decay) as f32;
        let (lr, eps) = (lr as f32, c.eps as f32);
        for (((p, &g), m), v) in params
            .iter_mut()
            .zip(grad)
            .zip(self.m.iter_mut())
            .zip(self.v.iter_mut())
        {
            *m = *m * b1 + g * one_b1;
            *v = *v * b2 + g * g * one_b2;
            let step = (*m * scale_m) / ((*v * scale_v).sqrt() + eps);
            *p = *p * decay - step * lr;
        }
    }
}
