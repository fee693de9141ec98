//! The committed model as the page's data: a layer and head of it feed every section, as an
//! upload does, with the prompt's bytes as the tokens' texts.

use kvlab::io::lm::{card, chosen, load, token_texts};
use kvlab::lab::Lab;
use kvlab::lm::Lm;
use kvlab::state::Settings;

fn model() -> Lm {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("www/model");
    let dir = std::env::var_os("KVLAB_MODEL_DIR").map_or(dir, Into::into);
    let c = card(&std::fs::read_to_string(dir.join("model.json")).expect("card")).expect("card");
    load(
        &c,
        &std::fs::read(dir.join("model.safetensors")).expect("weights"),
    )
    .expect("model")
}

#[test]
fn a_head_of_the_model_feeds_every_section() {
    let lm = model();
    let prompt = "In the beginning God created the heaven and the earth. And the earth was \
                  without form, and void; and darkness was upon the face of the deep.";
    let tokens = Lm::tokens(prompt);
    let run = lm.forward(&tokens).expect("forward");
    let mut lab = Lab::new(Settings::default()).expect("lab");
    let used = lab
        .use_chosen(chosen(&run, &tokens, 1, Some(2)).expect("chosen"))
        .expect("used");
    assert!(
        used.description.contains("layer 1, head 2"),
        "{}",
        used.description
    );
    let f = lab.figures();
    let t = tokens.len();
    assert_eq!(f.data.tokens, t);
    assert_eq!(f.data.steps, t, "every query row is a step");
    assert_eq!(f.data.channels, lm.config().head_dim());
    assert_eq!(f.select.kept_count, Settings::default().budget.min(t));
    assert!(f
        .compare
        .rows
        .iter()
        .all(|r| r.quality.is_some() || r.error.is_some()));
    // the whole layer's cache when no head is chosen: the heads side by side
    lab.use_chosen(chosen(&run, &tokens, 0, None).expect("chosen"))
        .expect("used");
    assert_eq!(lab.figures().data.channels, lm.config().d_model);
}

#[test]
fn a_layer_or_head_the_model_lacks_is_refused_in_words() {
    let lm = model();
    let tokens = Lm::tokens("x");
    let run = lm.forward(&tokens).expect("forward");
    let e = chosen(&run, &tokens, 9, None)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("layer 9: the model's layers are 0 to 3"), "{e}");
    let e = chosen(&run, &tokens, 0, Some(4))
        .expect_err("refused")
        .to_string();
    assert!(e.contains("head 4: the model's heads are 0 to 3"), "{e}");
}

#[test]
fn token_texts_name_bytes_as_text() {
    let t = token_texts(&Lm::tokens("a\n中"));
    assert_eq!(t, ["<s>", "a", "\n", "中", "\\xB8", "\\xAD"]);
}

#[test]
fn a_prompt_is_cut_to_the_context_from_its_end_and_an_empty_one_is_refused() {
    use kvlab::io::lm::prompt_tokens;
    let (t, note) = prompt_tokens("abc", 256).expect("short");
    assert_eq!((t, note), (vec![0, b'a', b'b', b'c'], None));
    let long = format!("中{}", "x".repeat(255));
    let (t, note) = prompt_tokens(&long, 256).expect("long");
    assert_eq!(t.len(), 256);
    assert_eq!(
        note.as_deref(),
        Some("the prompt has 258 bytes and the model reads 255: its last 255 are used")
    );
    // (never from inside a character)
    let (t, _) = prompt_tokens(&format!("中{}", "x".repeat(254)), 256).expect("long");
    assert_eq!(t.len(), 255);
    let e = prompt_tokens("", 256).expect_err("refused").to_string();
    assert!(e.contains("the prompt is empty"), "{e}");
}
