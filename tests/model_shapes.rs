//! Section 1's custom model describes a modern one (issue 38, item 2): query heads, a layer
//! pattern (how many layers slide, and their window) and MLA (latent and RoPE widths). Given a
//! preset's shape, a custom model reproduces every number of the preset exactly, in every
//! scope, index kind and kept-token rule; and real shapes beyond the presets are checked
//! against their bytes worked out by hand from the published configs.

use kvlab::budget::{breakdown, Compression, ModelConfig};
use kvlab::lab::{model_of, BudgetFigures, Lab};
use kvlab::state::{model_slug, Settings};

/// A small data set: the budget section's model numbers do not depend on its size beyond the
/// kept fraction, which is the same for the preset and its custom twin.
fn lab_at(query: &str) -> BudgetFigures {
    let parsed = Settings::from_query(&format!(
        "tokens=64&steps=16&channels=8&budget=16&recent=4&window=4&future=4&{query}"
    ));
    assert!(parsed.warnings.is_empty(), "{query}: {:?}", parsed.warnings);
    Lab::new(parsed.settings)
        .unwrap_or_else(|e| panic!("{query}: {e}"))
        .figures()
        .budget
        .clone()
}

/// The custom model's query for `m`'s shape (an MLA latent given as `latent + rope`).
fn custom_query(m: &ModelConfig, rope: u64) -> String {
    let (sliding_layers, sliding_window) = m.sliding.map_or((0, 4096), |s| (s.layers, s.window));
    let (latent, rope) = match m.mla_latent {
        Some(w) => (w - rope, rope),
        None => (0, 0),
    };
    format!(
        "model=custom&layers={}&kv_heads={}&q_heads={}&head_dim={}&fp_bytes={}&sliding_layers={sliding_layers}\
         &sliding_window={sliding_window}&mla_latent={latent}&mla_rope={rope}",
        m.layers, m.n_kv_heads, m.n_heads, m.d_head, m.fp_bytes
    )
}

#[test]
fn a_custom_model_reproduces_every_preset_given_its_shape() {
    let presets = ModelConfig::presets();
    assert!(presets.len() >= 11, "every preset is checked");
    for preset in &presets {
        // (DeepSeek's 576 is its 512-wide latent and its 64-wide RoPE key)
        let rope = if preset.mla_latent.is_some() { 64 } else { 0 };
        let custom = custom_query(preset, rope);
        let as_config = model_of(&Settings::from_query(&custom).settings);
        assert_eq!(
            ModelConfig {
                name: preset.name.clone(),
                ..as_config
            },
            *preset,
            "{custom}"
        );
        for scope in ["layer", "kv-head", "query-head"] {
            for rest in [
                "index=list&keep=fraction&context=131072",
                "index=mask&keep=tokens&context=32768&batch=8",
                "index=list&keep=fraction&context=1000&bits=2&method=snapkv",
                "index=mask&keep=fraction&context=4194304&memory_gib=8&method=streaming",
            ] {
                let common = format!("scope={scope}&{rest}");
                let slug = model_slug(&preset.name);
                let want = lab_at(&format!("model={slug}&{common}"));
                let got = lab_at(&format!("{custom}&{common}"));
                let strip = |b: BudgetFigures| BudgetFigures {
                    model_name: String::new(),
                    model: ModelConfig {
                        name: String::new(),
                        ..b.model
                    },
                    ..b
                };
                assert_eq!(
                    strip(got),
                    strip(want),
                    "{} as custom, {common}",
                    preset.name
                );
            }
        }
    }
}

/// `bytes_token_fp` and `M_fp` at 131,072 tokens of real models beyond the presets, worked
/// out by hand from their published configs (`num_hidden_layers`, `num_key_value_heads`,
/// `head_dim`, `sliding_window` and the layer pattern, `kv_lora_rank + qk_rope_head_dim`).
#[test]
fn real_shapes_beyond_the_presets_match_their_bytes_by_hand() {
    const T: u64 = 131_072;
    // (name, query, bytes per token, M_fp at T)
    let shapes: [(&str, &str, u64, u64); 9] = [
        // Llama-3.2-1B: 16 layers, 8 KV heads of 64, 32 query heads
        (
            "Llama-3.2-1B",
            "layers=16&kv_heads=8&q_heads=32&head_dim=64",
            2 * 16 * 8 * 64 * 2,
            2 * 16 * 8 * 64 * 2 * T,
        ),
        // Llama-3.2-3B: 28 layers, 8 KV heads of 128, 24 query heads
        (
            "Llama-3.2-3B",
            "layers=28&kv_heads=8&q_heads=24&head_dim=128",
            114_688,
            114_688 * T,
        ),
        // Llama-2-70B / Qwen2.5-72B: 80 layers, 8 KV heads of 128, 64 query heads
        (
            "Qwen2.5-72B",
            "layers=80&kv_heads=8&q_heads=64&head_dim=128",
            327_680,
            327_680 * T,
        ),
        // Mistral-Nemo-12B: 40 layers, 8 KV heads of 128, 32 query heads, no sliding window
        (
            "Mistral-Nemo",
            "layers=40&kv_heads=8&q_heads=32&head_dim=128",
            163_840,
            163_840 * T,
        ),
        // GPT-3 175B: 96 layers of 96 heads of 128 (multi-head: one KV head per query head)
        (
            "GPT-3 175B",
            "layers=96&kv_heads=96&q_heads=96&head_dim=128",
            4_718_592,
            4_718_592 * T,
        ),
        // Gemma-2-27B: 46 layers, every other one sliding over 4,096, 16 KV heads of 128
        (
            "Gemma-2-27B",
            "layers=46&kv_heads=16&q_heads=32&head_dim=128&sliding_layers=23&sliding_window=4096",
            2 * 46 * 16 * 128 * 2,
            2 * 16 * 128 * 2 * (23 * T + 23 * 4096),
        ),
        // Gemma-3-12B: 48 layers, 5 local of every 6 (40) over 1,024, 8 KV heads of 256
        (
            "Gemma-3-12B",
            "layers=48&kv_heads=8&q_heads=16&head_dim=256&sliding_layers=40&sliding_window=1024",
            2 * 48 * 8 * 256 * 2,
            2 * 8 * 256 * 2 * (8 * T + 40 * 1024),
        ),
        // Mistral-7B-v0.1's shape with its window: every layer slides over 4,096
        (
            "Mistral-7B",
            "layers=32&kv_heads=8&q_heads=32&head_dim=128&sliding_layers=32&sliding_window=4096",
            131_072,
            131_072 * 4096,
        ),
        // DeepSeek-V2-Lite: 27 layers of MLA, a 512-wide latent and a 64-wide RoPE key
        (
            "DeepSeek-V2-Lite",
            "layers=27&kv_heads=16&q_heads=16&head_dim=128&mla_latent=512&mla_rope=64",
            27 * 576 * 2,
            27 * 576 * 2 * T,
        ),
    ];
    for (name, shape, per_token, m_fp) in shapes {
        let parsed = Settings::from_query(&format!("model=custom&{shape}"));
        assert!(parsed.warnings.is_empty(), "{name}: {:?}", parsed.warnings);
        let model = model_of(&parsed.settings);
        assert_eq!(model.bytes_token_fp(), per_token, "{name}");
        let b = breakdown(&model, &Compression::none(T)).expect(name);
        assert_eq!(b.m_fp, m_fp, "{name}");
        // (the page's own figures at 128k)
        let page = lab_at(&format!("model=custom&{shape}&context={T}"));
        assert_eq!(page.extrapolated.m_fp, m_fp, "{name} on the page");
    }
}

/// Per query head, a custom model keeps a set (and a copy of K/V) per query head: a custom
/// Llama-3-70B said 640 kept sets and 2.657 GiB where the preset said 5,120 and 21.25 GiB.
#[test]
fn per_query_head_follows_the_custom_query_heads() {
    let shape = "layers=80&kv_heads=8&q_heads=64&head_dim=128";
    let custom = lab_at(&format!("model=custom&{shape}&scope=query-head"));
    let preset = lab_at("model=llama-3-70b&scope=query-head");
    assert_eq!(custom.selection_copies, 80 * 64);
    assert_eq!(custom.kv_copy_factor, 8);
    assert_eq!(custom.model_gib_final, preset.model_gib_final);
    // One query head a KV head (multi-head attention): no copies; 0 says the same, as a custom
    // model without query heads (a link made before the field) does.
    for q in ["&q_heads=8", "&q_heads=0", ""] {
        let mha = lab_at(&format!(
            "model=custom&layers=80&kv_heads=8&head_dim=128&scope=query-head{q}"
        ));
        assert_eq!(
            (mha.selection_copies, mha.kv_copy_factor),
            (80 * 8, 1),
            "{q}"
        );
    }
    // A custom model whose KV heads change alone stays counted (LLaMA-65B: 64 KV heads).
    let llama65 = lab_at("model=custom&layers=80&kv_heads=64&head_dim=128");
    assert_eq!(llama65.model.n_heads, 64);
}

/// A custom model with more sliding layers than layers is refused by name, not counted.
#[test]
fn more_sliding_layers_than_layers_is_refused() {
    let parsed = Settings::from_query("model=custom&layers=4&sliding_layers=5");
    let Err(e) = Lab::new(parsed.settings) else {
        panic!("5 sliding layers of 4 were counted");
    };
    assert!(e.to_string().contains("sliding layers 5"), "{e}");
}
