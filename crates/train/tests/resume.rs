//! A stopped run, resumed from its checkpoint, reaches the same weights as one that never
//! stopped (at the same thread count): the weights, both AdamW moments, the step and the
//! batch generator all come back.

use kvlab_train::adamw::AdamWConfig;
use kvlab_train::checkpoint::Settings;
use kvlab_train::data::{Corpus, Mixture};
use kvlab_train::params::Shape;
use kvlab_train::run::{self, State, CHECKPOINT};

/// Enough text for the corpus's split, varied so that windows differ.
fn corpus() -> Corpus {
    let mut text = Vec::new();
    let mut i = 0u32;
    while text.len() < 100_000 {
        text.extend_from_slice(
            format!(
                "And {} said unto {}, Go thy way.\n",
                ["Moses", "Aaron", "Jacob"][(i % 3) as usize],
                i % 97
            )
            .as_bytes(),
        );
        i += 1;
    }
    Corpus::new(text).unwrap()
}

fn settings() -> Settings {
    Settings {
        shape: Shape {
            d_model: 16,
            layers: 2,
            heads: 2,
            mlp: 32,
            context: 256,
            vocab: 256,
            rope_base: 10_000.0,
        },
        mixture: Mixture::Recall,
        steps: 6,
        batch: 3,
        seed: 11,
        threads: 2,
        peak_lr: 3e-3,
        warmup: 2,
        adamw: AdamWConfig::default(),
        probe_every: 4,
        checkpoint_every: 2,
        init: None,
    }
}

#[test]
fn a_resumed_run_reaches_the_uninterrupted_runs_weights() {
    let corpus = corpus();
    let tmp = std::env::temp_dir().join(format!("kvlab-resume-{}", std::process::id()));
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    let mut quiet = |_: &str| {};
    let mut whole = State::fresh(settings());
    run::train(&mut whole, &corpus, Some(&a), usize::MAX, &mut quiet).unwrap();
    assert_eq!(whole.header.step, 6);

    let mut first = State::fresh(settings());
    run::train(&mut first, &corpus, Some(&b), 3, &mut quiet).unwrap();
    assert_eq!(first.header.step, 3);
    assert!(b.join(CHECKPOINT).is_file());
    // a new process would start from the file alone
    drop(first);
    let mut resumed = State::load(&b).unwrap();
    assert_eq!(resumed.header.step, 3);
    run::train(&mut resumed, &corpus, Some(&b), usize::MAX, &mut quiet).unwrap();

    assert_eq!(resumed.header.step, whole.header.step);
    assert_eq!(resumed.header.rng, whole.header.rng);
    assert!(resumed.params == whole.params, "the weights differ");
    assert!(resumed.adam == whole.adam, "the optimizer's state differs");
    // and the run did train: the weights moved from their start
    assert!(whole.params != State::fresh(settings()).params);
    // the file on disk is the finished run
    let on_disk = State::load(&b).unwrap();
    assert!(on_disk.params == whole.params && on_disk.header.step == 6);
    std::fs::remove_dir_all(&tmp).ok();
}

#[test]
fn a_damaged_checkpoint_is_refused_with_its_reason() {
    let tmp = std::env::temp_dir().join(format!("kvlab-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let state = State::fresh(settings());
    state.save(&tmp).unwrap();
    let path = tmp.join(CHECKPOINT);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
    let err = State::load(&tmp).unwrap_err();
    assert!(err.contains("after the header"), "{err}");
    std::fs::write(&path, b"not a checkpoint").unwrap();
    assert!(State::load(&tmp).unwrap_err().contains("KVLABCK1"));
    std::fs::remove_dir_all(&tmp).ok();
}
