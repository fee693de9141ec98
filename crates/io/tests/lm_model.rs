//! The committed model (`www/model/`, written by `cargo xtask train`): it loads, kvlab's own forward
//! pass gives the trainer's logits, decoding with a cache gives the full forward's, and the
//! weights reach the held-out loss their card states. (`KVLAB_MODEL_DIR` points these at
//! another trainer output.)

use kvlab_core::lm::{mean_loss, KvCache, Lm, LmError};
use kvlab_io::lm::{card, load, references, ModelCard, ModelError, Reference};

fn dir() -> std::path::PathBuf {
    std::env::var_os("KVLAB_MODEL_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www/model"),
        Into::into,
    )
}

fn model() -> (ModelCard, Lm) {
    let d = dir();
    let json = std::fs::read_to_string(d.join("model.json")).expect("model/model.json");
    let c = card(&json).expect("the card parses");
    let weights = std::fs::read(d.join("model.safetensors")).expect("model/model.safetensors");
    let lm = load(&c, &weights).expect("the weights make the card's model");
    (c, lm)
}

fn reference() -> Vec<Reference> {
    let json = std::fs::read_to_string(dir().join("reference.json")).expect("reference.json");
    references(&json).expect("the references parse").references
}

#[test]
fn the_forward_pass_gives_the_trainers_logits() {
    let (_, lm) = model();
    let refs = reference();
    assert!(!refs.is_empty());
    for r in &refs {
        let run = lm
            .forward(&Lm::tokens(&r.prompt))
            .expect("a prompt within the context");
        assert_eq!(run.logits.rows(), r.logits.len(), "{}", r.prompt);
        let mut worst = 0f32;
        for (i, want) in r.logits.iter().enumerate() {
            let got = run.logits.row(i).expect("a row per position");
            assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(want) {
                worst = worst.max((a - b).abs());
            }
        }
        assert!(worst <= 1e-4, "{:?}: logits differ by {worst}", r.prompt);
    }
}

#[test]
fn decoding_with_the_cache_gives_the_full_forwards_logits() {
    let (_, lm) = model();
    let tokens = Lm::tokens(&reference()[0].prompt);
    let full = lm.forward(&tokens).expect("forward");
    let mut cache = KvCache::default();
    for (i, &t) in tokens.iter().enumerate() {
        let logits = lm.decode(&mut cache, t).expect("decode");
        let want = full.logits.row(i).expect("row");
        let worst = logits
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-5, "position {i}: {worst}");
    }
    assert_eq!(cache.len(), tokens.len());
    // the cache holds the forward's own keys and values, after RoPE
    let (k, v) = (&full.keys[1][2], &full.values[3][0]);
    assert!(cache.keys[1][2]
        .iter()
        .zip(k.data())
        .all(|(a, b)| (a - b).abs() <= 1e-5));
    assert!(cache.values[3][0]
        .iter()
        .zip(v.data())
        .all(|(a, b)| (a - b).abs() <= 1e-5));
}

#[test]
fn the_weights_reach_the_held_out_loss_their_card_states() {
    let (c, lm) = model();
    let text = std::fs::read(dir().join("heldout.txt")).expect("model/heldout.txt");
    let w = lm.config().context - 1;
    let windows: Vec<&[u8]> = text.chunks_exact(w).collect();
    assert!(windows.len() >= 8, "{} windows", windows.len());
    let mean = windows
        .iter()
        .map(|win| {
            let mut tokens = vec![0u8];
            tokens.extend_from_slice(win);
            let run = lm.forward(&tokens[..w]).expect("forward");
            mean_loss(&run, &tokens)
        })
        .sum::<f64>()
        / windows.len() as f64;
    assert!(
        (mean - c.heldout_loss).abs() < 1e-3,
        "held-out loss {mean} against the card's {}",
        c.heldout_loss
    );
}

#[test]
fn attention_rows_are_causal_distributions() {
    let (_, lm) = model();
    let run = lm.forward(&Lm::tokens("And God said")).expect("forward");
    for layer in &run.attention {
        for a in layer {
            for (i, row) in a.iter_rows().enumerate() {
                let sum: f32 = row.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "row {i} sums to {sum}");
                assert!(
                    row[i + 1..].iter().all(|&v| v == 0.0),
                    "row {i} sees the future"
                );
            }
        }
    }
}

#[test]
fn bad_inputs_are_refused_in_words() {
    let (c, lm) = model();
    let context = lm.config().context;
    let e = lm.forward(&[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("0 tokens: the model takes 1 to {context} (BOS included)")
    );
    assert!(matches!(
        lm.forward(&vec![0; context + 1]),
        Err(LmError::Length { .. })
    ));
    // weights of another shape name the weight and both shapes
    let weights = std::fs::read(dir().join("model.safetensors")).expect("weights");
    let mut other = c.clone();
    other.config.mlp += 1;
    let e = load(&other, &weights).err().expect("refused");
    assert!(matches!(e, ModelError::Model(LmError::Shape { .. })), "{e}");
    assert!(
        e.to_string()
            .starts_with("weight 'layers.0.mlp.w1' has shape [128, 512]"),
        "{e}"
    );
    assert!(load(&c, b"not a safetensors file").is_err());
}
