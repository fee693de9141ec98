//! Reads kvlab's trained model: its card (`model.json`: the config, the training run, reference
//! logits) and its f16 weights (`model.safetensors`), into a [`kvlab_core::lm::Lm`].

use crate::safetensors;
use crate::{Limits, LoadError};
use kvlab_core::lm::{Lm, LmConfig, LmError};
use serde::Deserialize;
use thiserror::Error;

/// Why the model could not be read.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    /// The card is not the JSON the trainer writes.
    #[error("model card: {0}")]
    Card(String),
    /// The prompt, layer or head cannot be run.
    #[error("{0}")]
    Input(String),
    /// The weights file could not be read.
    #[error(transparent)]
    Weights(Box<LoadError>),
    /// The weights do not make the card's model.
    #[error(transparent)]
    Model(#[from] LmError),
}

/// What the trainer writes in `model.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ModelCard {
    /// The model's shape.
    pub config: LmConfig,
    /// The mean next-byte loss (nats) on the held-out slice, measured on the f16 weights.
    pub heldout_loss: f64,
    /// The training run.
    pub training: Training,
}

/// How the weights were trained (the card's `training`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Training {
    /// Parameters.
    pub parameters: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Sequences per step.
    pub batch: usize,
    /// The seed of the weights and the batches.
    pub seed: u64,
    /// Seconds it took.
    pub seconds: f64,
}

/// What the trainer writes in `reference.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct References {
    /// Every position's logits of fixed prompts, from the trainer's own forward pass.
    pub references: Vec<Reference>,
}

impl From<LoadError> for ModelError {
    fn from(e: LoadError) -> Self {
        ModelError::Weights(Box::new(e))
    }
}

/// A prompt and the logits the trainer's forward pass gave it (BOS first, every position).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Reference {
    /// The prompt's text.
    pub prompt: String,
    /// `len + 1` rows of `vocab` logits.
    pub logits: Vec<Vec<f32>>,
}

/// Parses the card.
pub fn card(json: &str) -> Result<ModelCard, ModelError> {
    serde_json::from_str(json).map_err(|e| ModelError::Card(e.to_string()))
}

/// Parses the reference logits (the tests' file; the page never fetches it).
pub fn references(json: &str) -> Result<References, ModelError> {
    serde_json::from_str(json).map_err(|e| ModelError::Card(e.to_string()))
}

/// The model of `card` with the weights in `weights` (a safetensors file, any float dtype).
pub fn load(card: &ModelCard, weights: &[u8]) -> Result<Lm, ModelError> {
    let file = "model.safetensors";
    let infos = safetensors::list(file, weights)?;
    let limits = Limits::default();
    let mut failed: Option<LoadError> = None;
    let lm = Lm::new(card.config, |name, want| {
        let Some(info) = infos.iter().find(|i| i.name == name) else {
            return Err(Vec::new());
        };
        if info.shape != want {
            return Err(info.shape.clone());
        }
        match safetensors::load_info(file, weights, info, &limits) {
            Ok(t) => Ok(t.data().to_vec()),
            Err(e) => {
                failed.get_or_insert(e);
                Err(info.shape.clone())
            }
        }
    });
    match (lm, failed) {
        (_, Some(e)) => Err(e.into()),
        (lm, None) => Ok(lm?),
    }
}

/// The text of each token for the charts and the kept-token list: BOS as `<s>`, a printable
/// ASCII byte or a line break as itself, the first byte of a UTF-8 character as the character,
/// any other byte (a character's continuation, invalid UTF-8) as `\xNN`.
pub fn token_texts(tokens: &[u8]) -> Vec<String> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, &b)| match b {
            0 if i == 0 => "<s>".to_string(),
            b'\n' | b' '..=b'~' => char::from(b).to_string(),
            _ => {
                let len = match b {
                    0xC2..=0xDF => 2,
                    0xE0..=0xEF => 3,
                    0xF0..=0xF4 => 4,
                    _ => 0,
                };
                tokens
                    .get(i..i + len)
                    .filter(|_| len > 0)
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .map_or_else(|| format!("\\x{b:02X}"), str::to_string)
            }
        })
        .collect()
}

/// What layer `layer` of `run` gives the page's sections, as an upload would: the attention
/// of head `head` (`T x T`, every query row a step) and its keys and values (`T x head_dim`),
/// or with `head` `None` the heads' mean attention and the layer's whole cache (`T x d`, the
/// heads side by side); `tokens` (BOS first) name the rows.
pub fn chosen(
    run: &kvlab_core::lm::LmRun,
    tokens: &[u8],
    layer: usize,
    head: Option<usize>,
) -> Result<crate::upload::Chosen, ModelError> {
    let heads = run.attention.get(layer).map_or(0, Vec::len);
    let bad = |what: String| ModelError::Input(what);
    if heads == 0 {
        return Err(bad(format!(
            "layer {layer}: the model's layers are 0 to {}",
            run.attention.len().saturating_sub(1)
        )));
    }
    let pick = |m: &[Vec<kvlab_core::Matrix>]| -> Result<kvlab_core::Matrix, ModelError> {
        let layer = &m[layer];
        match head {
            Some(h) => layer.get(h).cloned().ok_or_else(|| {
                bad(format!(
                    "head {h}: the model's heads are 0 to {}",
                    heads - 1
                ))
            }),
            None => {
                let (t, hd) = (layer[0].rows(), layer[0].cols());
                let mut data = Vec::with_capacity(t * hd * heads);
                for r in 0..t {
                    for m in layer {
                        data.extend_from_slice(m.row(r).unwrap_or(&[]));
                    }
                }
                kvlab_core::Matrix::new(t, hd * heads, data).map_err(|e| bad(e.to_string()))
            }
        }
    };
    let attention = match head {
        Some(_) => pick(&run.attention)?,
        None => {
            let layer = &run.attention[layer];
            let t = layer[0].rows();
            let mut mean = vec![0f32; t * t];
            for m in layer {
                for (a, &b) in mean.iter_mut().zip(m.data()) {
                    *a += b / heads as f32;
                }
            }
            kvlab_core::Matrix::new(t, t, mean).map_err(|e| bad(e.to_string()))?
        }
    };
    let who = head.map_or_else(
        || "the mean of its heads".to_string(),
        |h| format!("head {h}"),
    );
    let description = format!(
        "the model's layer {layer}, {who}, on the prompt ({} bytes after BOS)",
        tokens.len().saturating_sub(1)
    );
    let chosen = crate::upload::Chosen::new(
        Some(attention),
        Some(pick(&run.keys)?),
        Some(pick(&run.values)?),
        description,
        Vec::new(),
    )
    .map_err(|e| bad(e.to_string()))?;
    Ok(chosen.with_tokens(token_texts(tokens)))
}

/// The tokens of `prompt` for a model of `context` tokens: BOS, then its bytes; a prompt longer
/// than the model reads keeps its last `context - 1` bytes (from a character's start), and the
/// second value says so. An empty prompt is refused: the model needs a byte to predict from.
pub fn prompt_tokens(
    prompt: &str,
    context: usize,
) -> Result<(Vec<u8>, Option<String>), ModelError> {
    if prompt.is_empty() {
        return Err(ModelError::Input(
            "the prompt is empty: type at least one character".into(),
        ));
    }
    let room = context.saturating_sub(1);
    let bytes = prompt.as_bytes();
    if bytes.len() <= room {
        return Ok((kvlab_core::lm::Lm::tokens(prompt), None));
    }
    let mut from = bytes.len() - room;
    while !prompt.is_char_boundary(from) {
        from += 1;
    }
    let kept = &prompt[from..];
    let note = format!(
        "the prompt has {} bytes and the model reads {room}: its last {} are used",
        bytes.len(),
        kept.len()
    );
    Ok((kvlab_core::lm::Lm::tokens(kept), Some(note)))
}
