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
    pub config: CardConfig,
    /// The mean next-byte loss (nats) on the held-out slice, measured on the f16 weights.
    pub heldout_loss: f64,
    /// Every position's logits of fixed prompts, from the trainer's own forward pass.
    pub references: Vec<Reference>,
    /// The training run (steps, seconds, seed, ...), as written.
    pub training: serde_json::Value,
}

/// The card's config.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct CardConfig {
    /// Width.
    pub d_model: usize,
    /// Blocks.
    pub layers: usize,
    /// Heads.
    pub heads: usize,
    /// MLP width.
    pub mlp: usize,
    /// Context, BOS included.
    pub context: usize,
    /// Tokens.
    pub vocab: usize,
    /// RoPE's base.
    pub rope_base: f32,
    /// Layer norm's epsilon.
    pub norm_eps: f32,
}

impl From<LoadError> for ModelError {
    fn from(e: LoadError) -> Self {
        ModelError::Weights(Box::new(e))
    }
}

impl From<CardConfig> for LmConfig {
    fn from(c: CardConfig) -> Self {
        LmConfig {
            d_model: c.d_model,
            layers: c.layers,
            heads: c.heads,
            mlp: c.mlp,
            context: c.context,
            vocab: c.vocab,
            rope_base: c.rope_base,
            norm_eps: c.norm_eps,
        }
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

/// The model of `card` with the weights in `weights` (a safetensors file, any float dtype).
pub fn load(card: &ModelCard, weights: &[u8]) -> Result<Lm, ModelError> {
    let file = "model.safetensors";
    let infos = safetensors::list(file, weights)?;
    let limits = Limits::default();
    let mut failed: Option<LoadError> = None;
    let lm = Lm::new(card.config.into(), |name, want| {
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
