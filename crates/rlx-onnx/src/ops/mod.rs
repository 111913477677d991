//! The op registry: ONNX `op_type` → translator, one file per op family. A translator
//! answers `Ok(Some(outputs))` (one node per ONNX output, in order), `Ok(None)` ("not mine":
//! the dispatcher reports the op unsupported), or `Err` (broken, or a specific attribute /
//! dtype rlx does not do — always naming node, op type and opset). An op of a domain other
//! than the default one is keyed "domain::op_type".
mod attention;
mod bitwise;
mod cast_lowp;
mod causal_conv;
mod control;
mod conv_transpose;
mod einsum;
mod elementwise;
mod flex_attention;
mod grid_sample;
mod index;
mod layout;
mod linear_attention;
mod loss;
mod matmul;
mod misc;
mod nn;
mod norm;
mod quant;
mod quant_lowp;
mod reduce;
mod resize;
mod rnn;
mod rotary;
mod rounding;
mod shape;
mod spectral;
mod trig;
mod unpool;
mod window;

use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::NodeId;
use std::collections::HashMap;

/// What a translator returns: the node of each ONNX output, or None for "not mine".
pub type Translated = Result<Option<Vec<NodeId>>, OnnxError>;
/// One op's translator.
pub type Translator = fn(&mut ImportCtx, &NodeProto) -> Translated;
/// op_type → translator.
pub type Registry = HashMap<&'static str, Translator>;

/// Every op the importer maps.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    attention::register(&mut r);
    bitwise::register(&mut r);
    causal_conv::register(&mut r);
    control::register(&mut r);
    conv_transpose::register(&mut r);
    einsum::register(&mut r);
    grid_sample::register(&mut r);
    elementwise::register(&mut r);
    flex_attention::register(&mut r);
    index::register(&mut r);
    layout::register(&mut r);
    linear_attention::register(&mut r);
    loss::register(&mut r);
    matmul::register(&mut r);
    misc::register(&mut r);
    nn::register(&mut r);
    norm::register(&mut r);
    quant::register(&mut r);
    reduce::register(&mut r);
    resize::register(&mut r);
    rnn::register(&mut r);
    rotary::register(&mut r);
    rounding::register(&mut r);
    shape::register(&mut r);
    spectral::register(&mut r);
    trig::register(&mut r);
    unpool::register(&mut r);
    window::register(&mut r);
    r
}

/// Translate one node and bind its outputs by name.
pub(crate) fn translate(
    ctx: &mut ImportCtx,
    registry: &Registry,
    node: &NodeProto,
    opsets: &[(String, i64)],
) -> Result<(), OnnxError> {
    ctx.begin(node);
    let op_type = node.op_type.as_deref().unwrap_or("");
    let domain = node.domain.as_deref().unwrap_or("");
    // Ops of another domain are registered as "domain::op_type" (ai.onnx.preview's).
    let key = if domain.is_empty() || domain == "ai.onnx" {
        op_type.to_string()
    } else {
        format!("{domain}::{op_type}")
    };
    if key != op_type && !registry.contains_key(key.as_str()) {
        let v = opsets.iter().find(|(d, _)| d == domain).map(|o| o.1);
        return Err(ctx.unsupported(format!(
            "domain \"{domain}\" (opset {})",
            v.map_or("?".into(), |v| v.to_string())
        )));
    }
    let Some(f) = registry.get(key.as_str()) else {
        return Err(ctx.unsupported("op type"));
    };
    let outs = f(ctx, node)?.ok_or_else(|| ctx.unsupported("op type"))?;
    for (k, name) in node.output.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let id = *outs
            .get(k)
            .ok_or_else(|| ctx.unsupported(format!("output {k} (\"{name}\")")))?;
        ctx.define(name, id);
    }
    Ok(())
}

/// Shorthand: one output.
pub(crate) fn one(id: NodeId) -> Translated {
    Ok(Some(vec![id]))
}
