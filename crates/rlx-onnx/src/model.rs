//! Loading a model: ModelProto decode, opsets, graph inputs / initializers / outputs, then
//! every node through the op registry (`ops::translate`).
use crate::proto::{type_proto, ModelProto, ValueInfoProto};
use crate::tensor::{decode_tensor, onnx_dtype_name, rlx_dtype};
use crate::{ops, ImportCtx, OnnxError};
use prost::Message;
use rlx_ir::{Dim, Graph, HostTensor, Shape};
use std::collections::HashMap;
use std::path::Path;

/// An imported model: the graph plus the weights its params need.
#[derive(Clone, Debug)]
pub struct OnnxModel {
    pub graph: Graph,
    /// `(param name, value)` for every `Param` of the graph: pass each to `set_param_typed`.
    pub params: Vec<(String, HostTensor)>,
    /// `(domain, version)` of every opset import; the default domain is "".
    pub opsets: Vec<(String, i64)>,
    /// Graph input names (initializers excluded), in the model's order.
    pub inputs: Vec<String>,
    /// Graph output names, in order (the graph's outputs follow it).
    pub outputs: Vec<String>,
    /// The ONNX element type code of each output, where the model declares it: an output
    /// of a low-precision type (`lowp::Lowp`) is held in its carrier dtype.
    pub output_types: Vec<Option<i32>>,
    /// Inputs whose values were baked in from `ImportOptions::specialize` (the graph is
    /// valid only for those values; they must still be fed, and are otherwise unused).
    pub specialized: Vec<String>,
}

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Values of graph inputs that a node may read at import time when it needs a value rlx
    /// takes as a static parameter (shapes, axes, pads, split sizes). The imported graph is
    /// then specialised to those values: the ONNX node suite feeds such parameters as
    /// inputs, and rlx's shapes are static.
    pub specialize: HashMap<String, HostTensor>,
}

/// Read and import an `.onnx` file; external data is read from the file's folder.
pub fn load(path: impl AsRef<Path>) -> Result<OnnxModel, OnnxError> {
    load_with(path, &ImportOptions::default())
}

/// `load` with options.
pub fn load_with(path: impl AsRef<Path>, opts: &ImportOptions) -> Result<OnnxModel, OnnxError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| OnnxError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let model = decode_model(&bytes, &path.display().to_string())?;
    import_model_with(&model, Some(dir), opts)
}

fn decode_model(bytes: &[u8], what: &str) -> Result<ModelProto, OnnxError> {
    ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
        what: what.to_string(),
        msg: e.to_string(),
    })
}

/// Import a model from its bytes; `base_dir` is where external data may live (None: nowhere).
pub fn load_bytes(
    bytes: &[u8],
    base_dir: Option<&Path>,
    what: &str,
) -> Result<OnnxModel, OnnxError> {
    import_model(&decode_model(bytes, what)?, base_dir)
}

/// A graph input's rlx shape from its type; a dim with neither value nor name gets a
/// symbol of its own (`input:k`).
pub fn value_shape(v: &ValueInfoProto) -> Result<Shape, OnnxError> {
    let name = v.name.clone().unwrap_or_default();
    let unsupported = |msg: String| OnnxError::UnsupportedType {
        what: format!("value \"{name}\""),
        msg,
    };
    let ty = v.r#type.as_ref().and_then(|t| t.value.as_ref());
    let Some(type_proto::Value::TensorType(t)) = ty else {
        return Err(unsupported(match ty {
            None => "no type".into(),
            Some(type_proto::Value::SequenceType(_)) => "sequence".into(),
            Some(type_proto::Value::MapType(_)) => "map".into(),
            Some(type_proto::Value::OptionalType(_)) => "optional".into(),
            Some(_) => "sparse tensor".into(),
        }));
    };
    let code = t.elem_type.unwrap_or(0);
    let dtype = rlx_dtype(code).ok_or_else(|| unsupported(onnx_dtype_name(code)))?;
    let Some(shape) = &t.shape else {
        return Err(unsupported("a tensor of unknown rank".into()));
    };
    use crate::proto::tensor_shape_proto::dimension::Value as D;
    let mut dims = vec![];
    for (k, d) in shape.dim.iter().enumerate() {
        dims.push(match &d.value {
            Some(D::DimValue(n)) if *n >= 0 => Dim::Static(*n as usize),
            Some(D::DimParam(p)) if !p.is_empty() => Dim::Dynamic(p.clone()),
            _ => Dim::Dynamic(format!("{name}:{k}")),
        });
    }
    Ok(Shape::with_dims(dims, dtype))
}

/// Import a decoded model.
pub fn import_model(model: &ModelProto, base_dir: Option<&Path>) -> Result<OnnxModel, OnnxError> {
    import_model_with(model, base_dir, &ImportOptions::default())
}

/// `import_model` with options.
pub fn import_model_with(
    model: &ModelProto,
    base_dir: Option<&Path>,
    opts: &ImportOptions,
) -> Result<OnnxModel, OnnxError> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Graph("the model has no graph".into()))?;
    let opsets: Vec<(String, i64)> = model
        .opset_import
        .iter()
        .map(|o| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(1)))
        .collect();
    let opset = opsets
        .iter()
        .find(|(d, _)| d.is_empty() || d == "ai.onnx")
        .map(|(_, v)| *v)
        .unwrap_or(1);
    let mut ctx = ImportCtx::new(graph.name.as_deref().unwrap_or("onnx"), opset);
    ctx.set_hints(opts.specialize.clone());
    ctx.opsets = opsets.clone();
    for t in &graph.initializer {
        let name = t.name.clone().unwrap_or_default();
        let value = decode_tensor(t, base_dir)?;
        ctx.onnx_types
            .insert(name.clone(), t.data_type.unwrap_or(0));
        ctx.define_init(&name, value);
    }
    if !graph.sparse_initializer.is_empty() {
        return Err(OnnxError::UnsupportedType {
            what: "graph".into(),
            msg: "sparse initializers".into(),
        });
    }
    let mut inputs = vec![];
    for v in &graph.input {
        let name = v.name.clone().unwrap_or_default();
        if ctx.is_defined(&name) {
            continue; // an initializer listed as an input (IR < 4): its value is the default
        }
        let shape = value_shape(v)?;
        if let Some(type_proto::Value::TensorType(t)) =
            v.r#type.as_ref().and_then(|t| t.value.as_ref())
        {
            ctx.onnx_types
                .insert(name.clone(), t.elem_type.unwrap_or(0));
        }
        let id = ctx
            .graph
            .input(name.clone(), shape)
            .map_err(|e| OnnxError::Graph(e.to_string()))?;
        ctx.define(&name, id);
        inputs.push(name);
    }
    let registry = ops::registry();
    for node in &graph.node {
        ops::translate(&mut ctx, &registry, node, &opsets)?;
    }
    let mut outs = vec![];
    let mut names = vec![];
    let mut types = vec![];
    for v in &graph.output {
        let name = v.name.clone().unwrap_or_default();
        types.push(match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => t.elem_type,
            _ => None,
        });
        if !ctx.is_defined(&name) {
            return Err(OnnxError::Graph(format!(
                "output \"{name}\" is not produced by any node"
            )));
        }
        let id = ctx
            .value(&name)
            .map_err(|e| OnnxError::Graph(e.to_string()))?;
        outs.push(id);
        names.push(name);
    }
    ctx.graph.set_outputs(outs);
    Ok(OnnxModel {
        graph: ctx.graph,
        params: ctx.params,
        opsets,
        inputs,
        outputs: names,
        output_types: types,
        specialized: ctx.specialized,
    })
}
