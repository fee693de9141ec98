//! JavaScript-facing helpers of the page's module (wasm32 only, `web`, feature `page`): errors as
//! JavaScript `Error`s with a `field` naming the control, results as plain objects, progress
//! callbacks. (The upload module, on `kvlab-io` alone, words its errors the same way itself.)

use crate::budget::BudgetError;
use crate::lab::{LabError, Stage};
use serde::Serialize;
use wasm_bindgen::JsValue;

/// A JavaScript `Error` with `message` and a `field` property naming the control to show it
/// next to.
pub fn error(field: &str, message: &str) -> JsValue {
    let e = js_sys::Error::new(message);
    // Setting a property on a fresh Error object cannot fail; ignore the Result to stay total.
    let _ = js_sys::Reflect::set(&e, &"field".into(), &field.into());
    e.into()
}

/// [`error`] for a lab error (its [`LabError::field`] and message). A refusal the page words in
/// its language also carries `refusal`, its fields, and `refusalOf`, whose they are: `repair` (a
/// setting out of range, [`crate::state::Repair`]), `quant` ([`crate::quant::QuantError`]),
/// `select` ([`crate::select::SelectError`]), `range` (a channel the data does not have,
/// [`LabError::Channel`]: `{kind: "channel", channel, max}`) or `budget` (a model whose cache is
/// too large to count, [`BudgetError::Overflow`]: `{kind: "overflow"}`).
pub fn lab_error(e: &LabError) -> JsValue {
    let out = error(e.field(), &e.to_string());
    let refusal = match e {
        LabError::Setting { repair, .. } => Some(("repair", to_js(repair))),
        LabError::Quant(q) => Some(("quant", to_js(q))),
        LabError::Select { error, .. } => Some(("select", to_js(error))),
        LabError::Channel { channel, max } => Some((
            "range",
            to_js(&ChannelRefusal {
                kind: "channel",
                channel: *channel,
                max: *max,
            }),
        )),
        LabError::Budget(BudgetError::Overflow) => {
            Some(("budget", to_js(&KindOnly { kind: "overflow" })))
        }
        _ => None,
    };
    if let Some((of, Ok(fields))) = refusal {
        // (properties on a fresh Error object: cannot fail)
        let _ = js_sys::Reflect::set(&out, &"refusal".into(), &fields);
        let _ = js_sys::Reflect::set(&out, &"refusalOf".into(), &of.into());
    }
    out
}

/// A refusal with no fields but its kind.
#[derive(Serialize)]
struct KindOnly {
    kind: &'static str,
}

/// [`LabError::Channel`]'s fields for the page (a struct, so that no JSON value type is needed).
#[derive(Serialize)]
struct ChannelRefusal {
    kind: &'static str,
    channel: usize,
    max: usize,
}

/// `v` as a plain JavaScript object (maps as objects, as JSON would give them).
pub fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            error(
                "internal",
                &format!("could not convert a result for the page: {e}"),
            )
        })
}

/// A progress callback for the lab: calls `f(stage_key)`; an exception thrown by `f` is
/// ignored (progress is advisory and must not abort a computation).
pub fn reporter(f: Option<js_sys::Function>) -> impl FnMut(Stage) {
    move |stage: Stage| {
        if let Some(f) = &f {
            let _ = f.call1(&JsValue::NULL, &stage.key().into());
        }
    }
}
