//! The view as a file: JSON (kept sets, query, figures) and CSV.

use super::*;
use crate::select::Role;
use serde::Serialize;

impl Lab {
    /// Kept and dropped indices, each compared policy's kept set (as compact ranges, empty where
    /// the policy cannot select here), the view's query and its figures: what
    /// [`Lab::export_json`] writes. (The page converts it to a JavaScript object and writes the
    /// JSON there, so its module carries no JSON serializer.)
    pub fn export(&self) -> Export<'_> {
        // (Kept here, not in the figures: the page never reads them, and at long contexts they
        // were tens of kB of text per policy on every update.)
        let policies = self
            .compare
            .selections
            .iter()
            .map(|(p, sel)| PolicyKept {
                policy: p.name(),
                kept_ranges: sel
                    .as_ref()
                    .map_or_else(String::new, |x| compact_ranges(&x.kept)),
            })
            .collect();
        Export {
            settings_query: self.settings.to_query(),
            kept: &self.select.selection.kept,
            dropped: &self.select.selection.dropped,
            policies,
            figures: &self.figures,
        }
    }

    /// [`Lab::export`] as pretty-printed JSON.
    pub fn export_json(&self) -> String {
        serde_json::to_string_pretty(&self.export())
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// `token,state,score` per token, then the breakdown terms as `term,bytes` rows.
    pub fn export_csv(&self) -> String {
        let texts = self.data.tokens.as_deref();
        let mut out = String::from(if texts.is_some() {
            "token,kept,role,score,text\n"
        } else {
            "token,kept,role,score\n"
        });
        let mask = self.select.selection.mask();
        let mut roles = vec![""; mask.len()];
        for (&i, r) in self
            .select
            .selection
            .kept
            .iter()
            .zip(&self.select.selection.roles)
        {
            if let Some(x) = roles.get_mut(i) {
                *x = match r {
                    Role::Heavy => "heavy",
                    Role::Recent => "recent",
                    Role::Sink => "sink",
                };
            }
        }
        for (i, (&k, score)) in mask.iter().zip(&self.select.scores).enumerate() {
            out.push_str(&format!("{i},{},{},{score}", u8::from(k), roles[i]));
            // (the prompt's token text, quoted as CSV quotes: any comma, quote or line break
            // stays inside its field)
            if let Some(t) = texts.and_then(|t| t.get(i)) {
                out.push_str(&format!(",\"{}\"", t.replace('"', "\"\"")));
            }
            out.push('\n');
        }
        let b = &self.figures.budget.data;
        out.push_str("\nterm,bytes\n");
        for (name, v) in [
            ("m_fp", b.m_fp),
            ("m_codes", b.m_codes),
            ("m_fp_kept", b.m_fp_kept),
            ("m_scales", b.m_scales),
            ("m_zero_points", b.m_zero_points),
            ("m_score_state", b.m_score_state),
            ("m_index", b.m_index),
            ("m_final", b.m_final),
        ] {
            out.push_str(&format!("{name},{v}\n"));
        }
        out.push_str(&format!(
            "r_token,{}\nr_overall,{}\n",
            b.r_token, b.r_overall
        ));
        out
    }
}

/// What the JSON export holds ([`Lab::export`]).
#[derive(Debug, Serialize)]
pub struct Export<'a> {
    /// The view's settings as a query string.
    pub settings_query: String,
    /// Kept token indices, ascending.
    pub kept: &'a [usize],
    /// Dropped token indices, ascending.
    pub dropped: &'a [usize],
    /// Each compared policy's kept set, in the comparison's order.
    pub policies: Vec<PolicyKept>,
    /// The view's figures.
    pub figures: &'a Figures,
}

/// One compared policy's kept set in the export.
#[derive(Debug, Serialize)]
pub struct PolicyKept {
    /// The policy's name.
    pub policy: &'static str,
    /// Its kept tokens as compact ranges (`0-3,17`), empty where it cannot select here.
    pub kept_ranges: String,
}
