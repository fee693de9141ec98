//! A run's checkpoint: everything a stopped run needs to continue to the weights an
//! uninterrupted one reaches (at the same thread count): its settings, the step, the batch
//! generator's state, the weights and both AdamW moments.
//!
//! One file, `checkpoint.bin`: the 8 bytes `KVLABCK1`, the header's length (u64, little
//! endian), the header as JSON ([`Header`]), then the weights, the first and the second
//! moments, each `len` f32 little endian. Written to a temporary file and renamed, so a run
//! killed while writing leaves the previous checkpoint whole.

use crate::adamw::{AdamW, AdamWConfig};
use crate::data::Mixture;
use crate::params::Shape;
use std::path::Path;

const MAGIC: &[u8; 8] = b"KVLABCK1";

/// What a run was started with (a resumed run takes these, not the command line's).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub shape: Shape,
    pub mixture: Mixture,
    /// Steps in all (the schedule's length).
    pub steps: usize,
    /// Sequences per step.
    pub batch: usize,
    pub seed: u64,
    /// Threads the batch is split across (the gradient's float sums depend on it).
    pub threads: usize,
    /// The learning rate's peak, reached after `warmup` steps; cosine to a tenth of it after.
    pub peak_lr: f64,
    pub warmup: usize,
    pub adamw: AdamWConfig,
    /// Steps between probes and between checkpoints.
    pub probe_every: usize,
    pub checkpoint_every: usize,
    /// Where the first weights came from when not from the seed: another run's checkpoint
    /// (its folder and step), its optimizer state left behind (`--init`).
    #[serde(default)]
    pub init: Option<String>,
}

impl Settings {
    /// The learning rate of `step` (0-based): linear warm-up, then cosine to a tenth.
    pub fn lr_at(&self, step: usize) -> f64 {
        let warmup = self.warmup.max(1);
        if step < warmup {
            return self.peak_lr * (step + 1) as f64 / warmup as f64;
        }
        let p = (step - warmup) as f64 / (self.steps.saturating_sub(warmup)).max(1) as f64;
        self.peak_lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * p.min(1.0)).cos()))
    }
}

/// The checkpoint's header.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Header {
    pub settings: Settings,
    /// Steps done.
    pub step: usize,
    /// The batch generator's state after them.
    pub rng: [u64; 4],
    /// Seconds of training so far (every session's).
    pub seconds: f64,
    /// Values in the weights (and in each moment).
    pub len: usize,
}

/// Writes the checkpoint atomically.
pub fn save(path: &Path, header: &Header, params: &[f32], adam: &AdamW) -> std::io::Result<()> {
    let json = serde_json::to_vec(header).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(16 + json.len() + 12 * params.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    for part in [params, &adam.m[..], &adam.v[..]] {
        for v in part {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &out)?;
    std::fs::rename(&tmp, path)
}

/// Reads a checkpoint: its header, the weights and the optimizer's state.
pub fn load(path: &Path) -> Result<(Header, Vec<f32>, AdamW), String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the checkpoint {}: {e}", path.display()))?;
    let bad = |why: &str| format!("{} is not a kvlab checkpoint: {why}", path.display());
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad("it does not start with KVLABCK1"));
    }
    let hlen =
        u64::from_le_bytes(bytes[8..16].try_into().map_err(|_| bad("short header"))?) as usize;
    let body = 16usize
        .checked_add(hlen)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| bad("its header runs past the file"))?;
    let header: Header =
        serde_json::from_slice(&bytes[16..body]).map_err(|e| bad(&format!("header: {e}")))?;
    let n = header.len;
    if bytes.len() - body != 12 * n {
        return Err(bad(&format!(
            "{} bytes after the header, where {n} weights and two moments need {}",
            bytes.len() - body,
            12 * n
        )));
    }
    let floats: Vec<f32> = bytes[body..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut adam = AdamW::new(header.settings.adamw, n);
    adam.m.copy_from_slice(&floats[n..2 * n]);
    adam.v.copy_from_slice(&floats[2 * n..]);
    adam.steps = header.step as u64;
    Ok((header, floats[..n].to_vec(), adam))
}
