//! Which uploaded tensor plays which role (attention `A`, keys `K`, values `V`), decided when
//! files arrive so that a learner who drops in a capture needs one press of "Use".
//!
//! Shapes decide first, names second:
//! - attention is a non-negative tensor of rank 2 or 3 (after leading axes of 1 are dropped,
//!   [`crate::squeezed`]) whose rows sum to 1 ([`ROW_SUM_TOLERANCE`]); failing that, a
//!   non-negative one whose name says attention, then one whose `T` some K or V shares (its
//!   rows can then be normalised);
//! - keys and values are finite tensors of rank 2 to 4 whose `T` (the second-to-last axis)
//!   equals the attention's `T`; between them the name decides (`key`, `k`, `value`, `v`,
//!   `past_key_values.N.key`, `layers.N.v`, ...), then the order the files came in.
//!
//! A tensor is never given two roles. What no tensor fits stays generated. Each role comes
//! with the reason it was given ([`Reason`]), and what the rules could not settle alone is
//! listed as an [`Ambiguity`], so the page can say what to check.

use crate::{squeezed, FieldSink, NamedTensor, ROW_SUM_TOLERANCE};

/// A role of an uploaded tensor in the note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Attention `A` (`S x T`).
    Attention,
    /// Keys `K` (`T x d`).
    Keys,
    /// Values `V` (`T x d`).
    Values,
}

impl Role {
    /// `attention`, `keys` or `values`.
    pub fn key(self) -> &'static str {
        match self {
            Role::Attention => "attention",
            Role::Keys => "keys",
            Role::Values => "values",
        }
    }
}

/// One uploaded tensor, as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TensorRef {
    /// `file::tensor`, the id the page's selects use.
    pub id: String,
    /// The tensor's name (the file name for single-tensor formats).
    pub name: String,
    /// Its shape as stored in the file.
    pub shape: Vec<usize>,
}

/// Why a role went to its tensor, or to none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Why {
    /// Attention: non-negative and every row sums to 1.
    Distribution,
    /// Attention: non-negative and named so, but its rows do not all sum to 1.
    NamedAttention,
    /// Attention: non-negative, and its `T` is that of a tensor that can be K or V (its rows do
    /// not all sum to 1, and its name says nothing).
    NonNegative,
    /// Keys or values: the name says so.
    Named,
    /// Keys or values: its `T` equals the attention's.
    MatchesAttention,
    /// Keys: the one tensor that can be keys or values, and its name says neither.
    OnlyOne,
    /// Keys or values: two tensors fit and no name tells them apart, so the order decides
    /// (the first is K); see [`Ambiguity::KeysOrValues`].
    Order,
    /// No uploaded tensor fits: generated data stands in.
    Generated,
}

impl Why {
    /// The reason's key for the page's templates (`distribution`, `namedAttention`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Why::Distribution => "distribution",
            Why::NamedAttention => "namedAttention",
            Why::NonNegative => "nonNegative",
            Why::Named => "named",
            Why::MatchesAttention => "matchesAttention",
            Why::OnlyOne => "onlyOne",
            Why::Order => "order",
            Why::Generated => "generated",
        }
    }
}

/// One role's decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Reason {
    /// The role.
    pub role: Role,
    /// The tensor given it, or `None` when generated data stands in.
    pub tensor: Option<TensorRef>,
    /// Why.
    pub why: Why,
    /// `T` of the tensor (the attention's last axis, K's or V's second-to-last), when given.
    pub tokens: Option<usize>,
}

impl Reason {
    /// The English line, e.g. `keys: k.npy [50, 16], T = 50 matches the attention`.
    pub fn english(&self) -> String {
        let role = self.role.key();
        let Some(t) = &self.tensor else {
            return format!("{role}: none fits, generated");
        };
        let shape = crate::fmt_shape(&t.shape);
        let tokens = self.tokens.unwrap_or(0);
        let why = match self.why {
            Why::Distribution => "non-negative, every row sums to 1".to_string(),
            Why::NamedAttention => {
                "named attention, non-negative, but its rows do not all sum to 1".to_string()
            }
            Why::NonNegative => {
                format!("non-negative, T = {tokens} as K/V have (its rows do not all sum to 1)")
            }
            Why::Named => format!("the name says {role}"),
            Why::MatchesAttention => format!("T = {tokens} matches the attention"),
            Why::OnlyOne => "the one tensor left".to_string(),
            Why::Order => "picked by order: no name tells K from V".to_string(),
            Why::Generated => "generated".to_string(),
        };
        format!("{role}: {} {shape}, {why}", t.name)
    }
}

/// Something the rules could not settle alone: the page says it, and the learner checks the
/// selects.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Ambiguity {
    /// More than one tensor looks like attention; the first was chosen.
    SeveralAttention {
        /// Their names, the chosen one first.
        names: Vec<String>,
    },
    /// More than one tensor is named (or fits) as one role; the first was chosen.
    Several {
        /// `keys` or `values`.
        role: &'static str,
        /// Their names, the chosen one first.
        names: Vec<String>,
    },
    /// Two tensors fit K and V and no name says which is which: the first is taken as K.
    KeysOrValues {
        /// Taken as K.
        keys: String,
        /// Taken as V.
        values: String,
    },
    /// A tensor was left unused: its `T` differs from the data's.
    TokensDiffer {
        /// The tensor's name.
        name: String,
        /// Its `T`.
        tokens: usize,
        /// The `T` of the data chosen.
        expected: usize,
    },
}

impl Ambiguity {
    /// This note's fields for the page's templates (`names` joined by `, `, with their
    /// `count`), as [`crate::LoadError::visit`] gives an error's; returns its kind
    /// (`severalAttention`, `several`, `keysOrValues`, `tokensDiffer`).
    pub fn visit(&self, field: &mut FieldSink<'_>) -> &'static str {
        let mut names = |n: &[String]| {
            field("names", &n.join(", "));
            field("count", &n.len());
        };
        match self {
            Ambiguity::SeveralAttention { names: n } => {
                names(n);
                "severalAttention"
            }
            Ambiguity::Several { role, names: n } => {
                names(n);
                field("role", role);
                "several"
            }
            Ambiguity::KeysOrValues { keys, values } => {
                field("keys", keys);
                field("values", values);
                "keysOrValues"
            }
            Ambiguity::TokensDiffer {
                name,
                tokens,
                expected,
            } => {
                field("name", name);
                field("tokens", tokens);
                field("expected", expected);
                "tokensDiffer"
            }
        }
    }

    /// The English sentence.
    pub fn english(&self) -> String {
        match self {
            Ambiguity::SeveralAttention { names } => format!(
                "{} tensors look like attention ({}): the first is used; choose another below",
                names.len(),
                names.join(", ")
            ),
            Ambiguity::Several { role, names } => format!(
                "{} tensors could be the {role} ({}): the first is used; choose another below",
                names.len(),
                names.join(", ")
            ),
            Ambiguity::KeysOrValues { keys, values } => format!(
                "no name tells K from V: {keys} is taken as K and {values} as V; swap them below if that is wrong"
            ),
            Ambiguity::TokensDiffer {
                name,
                tokens,
                expected,
            } => format!("{name} is not used: its T = {tokens}, the data's T = {expected}"),
        }
    }
}

/// The roles proposed for the uploaded tensors ([`crate::upload::Uploads::assign`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Assignment {
    /// Attention, keys and values in that order, each with its reason.
    pub reasons: [Reason; 3],
    /// What the rules could not settle alone (empty when the assignment is unambiguous).
    pub ambiguities: Vec<Ambiguity>,
}

impl Assignment {
    /// The id (`file::tensor`) given `role`, or `None` when generated data stands in.
    pub fn id(&self, role: Role) -> Option<&str> {
        self.reasons
            .iter()
            .find(|r| r.role == role)
            .and_then(|r| r.tensor.as_ref())
            .map(|t| t.id.as_str())
    }

    /// Whether the rules settled every role alone.
    pub fn is_unambiguous(&self) -> bool {
        self.ambiguities.is_empty()
    }
}

/// What a tensor's name says of its role: the last word of it that names one decides
/// (`past_key_values.5.key` is keys: "values" there is part of the cache's name).
pub fn named_role(name: &str) -> Option<Role> {
    // (a file's extension is a word too, but never one of these)
    const WORDS: [(&str, Role); 14] = [
        ("attn", Role::Attention),
        ("att", Role::Attention),
        ("attention", Role::Attention),
        ("attentions", Role::Attention),
        ("attns", Role::Attention),
        ("probs", Role::Attention),
        ("k", Role::Keys),
        ("key", Role::Keys),
        ("keys", Role::Keys),
        ("kcache", Role::Keys),
        ("v", Role::Values),
        ("value", Role::Values),
        ("values", Role::Values),
        ("vcache", Role::Values),
    ];
    name.rsplit(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| {
            WORDS
                .iter()
                .find(|(known, _)| known.eq_ignore_ascii_case(w))
                .map(|&(_, role)| role)
        })
}

/// The first number in a tensor's name (`past_key_values.5.key`: 5), to pair K and V of the
/// same layer.
fn layer_number(name: &str) -> Option<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .and_then(|w| w.parse().ok())
}

/// What the rules read off one tensor.
struct Traits {
    tensor: TensorRef,
    named: Option<Role>,
    layer: Option<u64>,
    /// Rank 2 or 3, finite, non-negative.
    attention_shaped: bool,
    /// And every row sums to 1.
    rows_sum_to_one: bool,
    /// Rank 2 to 4, finite.
    kv_shaped: bool,
    /// The attention's `T` (last axis).
    attention_tokens: usize,
    /// K's or V's `T` (second-to-last axis).
    kv_tokens: usize,
}

fn traits(file: &str, t: &NamedTensor) -> Traits {
    let shape = t.tensor.shape();
    let sq = squeezed(shape);
    let data = t.tensor.data();
    let finite = data.iter().all(|v| v.is_finite());
    let non_negative = finite && data.iter().all(|&v| v >= 0.0);
    let last = sq.last().copied().unwrap_or(0);
    let attention_shaped = (2..=3).contains(&sq.len()) && non_negative && !data.is_empty();
    let rows_sum_to_one = attention_shaped
        && data.chunks_exact(last.max(1)).all(|row| {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            (sum - 1.0).abs() <= f64::from(ROW_SUM_TOLERANCE)
        });
    Traits {
        tensor: TensorRef {
            id: format!("{file}::{}", t.name),
            name: t.name.clone(),
            shape: shape.to_vec(),
        },
        named: named_role(&t.name),
        layer: layer_number(&t.name),
        attention_shaped,
        rows_sum_to_one,
        kv_shaped: (2..=4).contains(&sq.len()) && finite && !data.is_empty(),
        attention_tokens: last,
        kv_tokens: sq
            .len()
            .checked_sub(2)
            .and_then(|i| sq.get(i))
            .copied()
            .unwrap_or(0),
    }
}

fn reason(role: Role, t: Option<&Traits>, why: Why) -> Reason {
    let tokens = t.map(|t| match role {
        Role::Attention => t.attention_tokens,
        _ => t.kv_tokens,
    });
    Reason {
        role,
        tensor: t.map(|t| t.tensor.clone()),
        why: if t.is_some() { why } else { Why::Generated },
        tokens,
    }
}

/// Proposes roles for `tensors` (`(file, tensor)` in upload order); see the module docs.
pub fn assign<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a NamedTensor)>) -> Assignment {
    let all: Vec<Traits> = tensors.into_iter().map(|(f, t)| traits(f, t)).collect();
    let mut ambiguities = Vec::new();

    // Attention: distributions first (not named K or V), then a non-negative tensor named so,
    // then one whose T a K/V candidate shares.
    let not_kv = |i: usize| !matches!(all[i].named, Some(Role::Keys | Role::Values));
    let distributions: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].rows_sum_to_one && not_kv(i))
        .collect();
    let has_partner = |i: usize| {
        all.iter().enumerate().any(|(j, t)| {
            j != i && t.kv_shaped && !t.rows_sum_to_one && t.kv_tokens == all[i].attention_tokens
        })
    };
    let attention = if distributions.is_empty() {
        (0..all.len())
            .find(|&i| all[i].attention_shaped && all[i].named == Some(Role::Attention))
            .map(|i| (i, Why::NamedAttention))
            .or_else(|| {
                (0..all.len())
                    .find(|&i| all[i].attention_shaped && not_kv(i) && has_partner(i))
                    .map(|i| (i, Why::NonNegative))
            })
    } else {
        // Among several: those named attention, then those whose T some K/V shares.
        let mut pool = distributions;
        for keep in [
            &(|i: usize| all[i].named == Some(Role::Attention)) as &dyn Fn(usize) -> bool,
            &has_partner,
        ] {
            let narrowed: Vec<usize> = pool.iter().copied().filter(|&i| keep(i)).collect();
            if !narrowed.is_empty() {
                pool = narrowed;
            }
        }
        if pool.len() > 1 {
            ambiguities.push(Ambiguity::SeveralAttention {
                names: pool.iter().map(|&i| all[i].tensor.name.clone()).collect(),
            });
        }
        pool.first().map(|&i| (i, Why::Distribution))
    };
    let attention_t = attention.map(|(i, _)| all[i].attention_tokens);

    // K and V: every other tensor that can be one, with the attention's T when there is one
    // (other distributions are attention the learner did not pick, not K or V).
    let mut fits = Vec::new();
    for (i, t) in all.iter().enumerate() {
        if Some(i) == attention.map(|(a, _)| a) || !t.kv_shaped {
            continue;
        }
        if t.rows_sum_to_one && t.named.is_none() {
            if let Some(at) = attention_t {
                if t.attention_tokens != at {
                    ambiguities.push(Ambiguity::TokensDiffer {
                        name: t.tensor.name.clone(),
                        tokens: t.attention_tokens,
                        expected: at,
                    });
                }
                continue;
            }
        }
        match attention_t {
            Some(at) if t.kv_tokens != at => ambiguities.push(Ambiguity::TokensDiffer {
                name: t.tensor.name.clone(),
                tokens: t.kv_tokens,
                expected: at,
            }),
            _ => fits.push(i),
        }
    }
    let named = |role: Role| -> Vec<usize> {
        fits.iter()
            .copied()
            .filter(|&i| all[i].named == Some(role))
            .collect()
    };
    let (keys_named, values_named) = (named(Role::Keys), named(Role::Values));
    let unnamed: Vec<usize> = fits
        .iter()
        .copied()
        .filter(|&i| !matches!(all[i].named, Some(Role::Keys | Role::Values)))
        .collect();
    let several = |role: Role, list: &[usize], out: &mut Vec<Ambiguity>| {
        if list.len() > 1 {
            out.push(Ambiguity::Several {
                role: role.key(),
                names: list.iter().map(|&i| all[i].tensor.name.clone()).collect(),
            });
        }
    };
    let matched = if attention.is_some() {
        Why::MatchesAttention
    } else {
        Why::OnlyOne
    };
    let mut keys = keys_named.first().map(|&i| (i, Why::Named));
    several(Role::Keys, &keys_named, &mut ambiguities);
    // V: named, the same layer as K's when the names number them (a cache of many layers).
    let mut values = keys
        .and_then(|(k, _)| {
            values_named
                .iter()
                .copied()
                .find(|&v| all[v].layer.is_some() && all[v].layer == all[k].layer)
        })
        .or_else(|| values_named.first().copied())
        .map(|i| (i, Why::Named));
    // (numbered pairs are one cache's layers: the keys' ambiguity already says which to pick)
    let paired = matches!((keys, values), (Some((k, _)), Some((v, _)))
        if all[k].layer.is_some() && all[k].layer == all[v].layer);
    if !paired {
        several(Role::Values, &values_named, &mut ambiguities);
    }
    let mut rest = unnamed.iter().copied();
    match (keys, values) {
        (None, None) => {
            keys = rest.next().map(|i| (i, matched));
            if let Some((k, _)) = keys {
                values = rest
                    .find(|&v| all[v].kv_tokens == all[k].kv_tokens)
                    .map(|v| (v, Why::Order));
                if let Some((v, _)) = values {
                    keys = Some((k, Why::Order));
                    ambiguities.push(Ambiguity::KeysOrValues {
                        keys: all[k].tensor.name.clone(),
                        values: all[v].tensor.name.clone(),
                    });
                }
            }
        }
        (Some((k, _)), None) => {
            values = rest
                .find(|&v| all[v].kv_tokens == all[k].kv_tokens)
                .map(|v| {
                    (
                        v,
                        if attention.is_some() {
                            Why::MatchesAttention
                        } else {
                            Why::Order
                        },
                    )
                });
        }
        (None, Some((v, _))) => {
            keys = rest
                .find(|&k| all[k].kv_tokens == all[v].kv_tokens)
                .map(|k| {
                    (
                        k,
                        if attention.is_some() {
                            Why::MatchesAttention
                        } else {
                            Why::Order
                        },
                    )
                });
        }
        (Some(_), Some(_)) => {}
    }
    // K and V must cover the same tokens (without attention nothing else ties them).
    if let (Some((k, _)), Some((v, _))) = (keys, values) {
        if all[k].kv_tokens != all[v].kv_tokens {
            ambiguities.push(Ambiguity::TokensDiffer {
                name: all[v].tensor.name.clone(),
                tokens: all[v].kv_tokens,
                expected: all[k].kv_tokens,
            });
            values = None;
        }
    }
    let pick = |role: Role, p: Option<(usize, Why)>| match p {
        Some((i, why)) => reason(role, all.get(i), why),
        None => reason(role, None, Why::Generated),
    };
    Assignment {
        reasons: [
            pick(Role::Attention, attention),
            pick(Role::Keys, keys),
            pick(Role::Values, values),
        ],
        ambiguities,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    fn named(name: &str, shape: &[usize], data: Vec<f32>) -> NamedTensor {
        NamedTensor {
            name: name.into(),
            tensor: Tensor::new(shape.to_vec(), data).expect("tensor"),
            dtype: "f32".into(),
        }
    }

    /// `S x T` rows that each sum to 1.
    fn attention(name: &str, s: usize, t: usize) -> NamedTensor {
        named(name, &[s, t], vec![1.0 / t as f32; s * t])
    }

    /// `T x d` with negative values (so it cannot be attention).
    fn kv(name: &str, t: usize, d: usize) -> NamedTensor {
        named(
            name,
            &[t, d],
            (0..t * d).map(|i| (i as f32).sin()).collect(),
        )
    }

    fn ids(a: &Assignment) -> [Option<&str>; 3] {
        [Role::Attention, Role::Keys, Role::Values].map(|r| a.id(r))
    }

    fn run(tensors: &[NamedTensor]) -> Assignment {
        assign(tensors.iter().map(|t| (t.name.as_str(), t)))
    }

    #[test]
    fn attention_and_keys_are_told_apart_by_shape_in_either_order() {
        for order in [[0, 1], [1, 0]] {
            let both = [attention("a.npy", 8, 50), kv("b.npy", 50, 16)];
            let files: Vec<NamedTensor> = order.iter().map(|&i| both[i].clone()).collect();
            let a = run(&files);
            assert_eq!(ids(&a), [Some("a.npy::a.npy"), Some("b.npy::b.npy"), None]);
            assert!(a.is_unambiguous(), "{:?}", a.ambiguities);
            assert_eq!(a.reasons[0].why, Why::Distribution);
            assert_eq!(
                a.reasons[1].english(),
                "keys: b.npy [50, 16], T = 50 matches the attention"
            );
            assert_eq!(a.reasons[2].english(), "values: none fits, generated");
        }
    }

    #[test]
    fn a_single_tensor_takes_one_role_and_the_rest_is_generated() {
        // the note's 3 x 4 example
        let note = named(
            "example.json",
            &[3, 4],
            vec![0.6, 0.2, 0.1, 0.1, 0.7, 0.1, 0.1, 0.1, 0.05, 0.05, 0.1, 0.8],
        );
        assert_eq!(
            ids(&run(&[note])),
            [Some("example.json::example.json"), None, None]
        );
        // a causal [T, T] attention is attention only, never also the keys
        let mut causal = vec![0.0; 16];
        for r in 0..4 {
            for c in 0..=r {
                causal[r * 4 + c] = 1.0 / (r + 1) as f32;
            }
        }
        let a = run(&[named("x.npy", &[4, 4], causal)]);
        assert_eq!(ids(&a), [Some("x.npy::x.npy"), None, None]);
        // keys alone: negative values, so not attention
        let a = run(&[kv("x.npy", 50, 16)]);
        assert_eq!(ids(&a), [None, Some("x.npy::x.npy"), None]);
        assert_eq!(a.reasons[1].why, Why::OnlyOne);
        // values alone, by name
        let a = run(&[kv("v.npy", 50, 16)]);
        assert_eq!(ids(&a), [None, None, Some("v.npy::v.npy")]);
        assert!(a.is_unambiguous());
    }

    #[test]
    fn names_split_k_from_v_and_hugging_face_caches_pair_by_layer() {
        let a = run(&[
            named("attentions.5", &[1, 2, 3, 6], vec![1.0 / 6.0; 36]),
            named("past_key_values.4.key", &[1, 2, 6, 4], vec![-1.0; 48]),
            named("past_key_values.5.value", &[1, 2, 6, 4], vec![-1.0; 48]),
            named("past_key_values.5.key", &[1, 2, 6, 4], vec![-1.0; 48]),
            named("past_key_values.4.value", &[1, 2, 6, 4], vec![-1.0; 48]),
        ]);
        let id = |r| {
            a.id(r)
                .map(|s| s.rsplit("::").next().unwrap_or_default().to_string())
        };
        assert_eq!(id(Role::Attention).as_deref(), Some("attentions.5"));
        assert_eq!(id(Role::Keys).as_deref(), Some("past_key_values.4.key"));
        assert_eq!(id(Role::Values).as_deref(), Some("past_key_values.4.value"));
        assert_eq!(a.reasons[2].why, Why::Named);
        // two layers of keys: which layer is the learner's choice, and the page says so
        assert!(matches!(
            a.ambiguities.as_slice(),
            [Ambiguity::Several { role: "keys", names }] if names.len() == 2
        ));
        for (name, role) in [
            ("past_key_values.5.key", Some(Role::Keys)),
            ("past_key_values.5.value", Some(Role::Values)),
            ("layers.3.k", Some(Role::Keys)),
            ("layers.3.v", Some(Role::Values)),
            ("k_cache.npy", Some(Role::Keys)),
            ("attn_l5.npy", Some(Role::Attention)),
            ("values.csv", Some(Role::Values)),
            ("kv.npy", None),
            ("keep.npy", None),
        ] {
            assert_eq!(named_role(name), role, "{name}");
        }
    }

    #[test]
    fn what_the_rules_cannot_settle_is_said() {
        // two unnamed K/V candidates: the order decides, and the page says so
        let a = run(&[
            attention("a.npy", 4, 10),
            kv("x.npy", 10, 3),
            kv("y.npy", 10, 3),
        ]);
        assert_eq!(ids(&a)[1..], [Some("x.npy::x.npy"), Some("y.npy::y.npy")]);
        assert_eq!(
            a.ambiguities,
            vec![Ambiguity::KeysOrValues {
                keys: "x.npy".into(),
                values: "y.npy".into()
            }]
        );
        // a tensor whose T differs from the attention's is left out, by name
        let a = run(&[attention("a.npy", 8, 50), kv("k.npy", 8, 16)]);
        assert_eq!(ids(&a), [Some("a.npy::a.npy"), None, None]);
        assert_eq!(
            a.ambiguities[0].english(),
            "k.npy is not used: its T = 8, the data's T = 50"
        );
        let (kind, fields) = crate::collect_parts(|f| a.ambiguities[0].visit(f));
        assert_eq!(kind, "tokensDiffer");
        assert_eq!(
            fields,
            vec![
                ("name", "k.npy".into()),
                ("tokens", "8".into()),
                ("expected", "50".into())
            ]
        );
        // two attention matrices: the one K matches is chosen, the other listed
        let a = run(&[
            attention("p.npy", 4, 7),
            attention("q.npy", 4, 9),
            kv("k.npy", 9, 2),
        ]);
        assert_eq!(ids(&a)[..2], [Some("q.npy::q.npy"), Some("k.npy::k.npy")]);
        assert!(a
            .ambiguities
            .iter()
            .any(|x| matches!(x, Ambiguity::TokensDiffer { name, .. } if name == "p.npy")));
        let a = run(&[attention("p.npy", 4, 7), attention("q.npy", 4, 7)]);
        assert!(
            matches!(&a.ambiguities[..], [Ambiguity::SeveralAttention { names }] if names.len() == 2)
        );
    }

    #[test]
    fn unnormalised_attention_needs_its_name() {
        // non-negative rows summing to 2: attention only when named so
        let twice = |name: &str| named(name, &[2, 3], vec![0.5, 0.5, 1.0, 1.0, 0.5, 0.5]);
        let a = run(&[twice("scores.npy")]);
        assert_eq!(ids(&a), [None, Some("scores.npy::scores.npy"), None]);
        let a = run(&[twice("attn.npy")]);
        assert_eq!(ids(&a), [Some("attn.npy::attn.npy"), None, None]);
        assert_eq!(a.reasons[0].why, Why::NamedAttention);
        // or when a K/V tensor shares its T (3): the attention's rows then need normalising
        let a = run(&[twice("h.npy"), kv("k.npy", 3, 2)]);
        assert_eq!(ids(&a)[..2], [Some("h.npy::h.npy"), Some("k.npy::k.npy")]);
        assert_eq!(
            a.reasons[0].english(),
            "attention: h.npy [2, 3], non-negative, T = 3 as K/V have (its rows do not all sum to 1)"
        );
    }
}
