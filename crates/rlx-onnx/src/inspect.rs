//! What `rlx inspect` and `rlx run` need from a model before (or instead of) importing it:
//! the graph inputs and outputs with their symbolic dims, opsets, op counts, which ops rlx
//! cannot import and why (found without stopping at the first), fixing symbolic dims to
//! sizes (rlx's shapes are static, so a model is specialised before import), and what range
//! an integer input's values may take (the rows of the table it indexes).
use crate::proto::tensor_shape_proto::dimension::Value as D;
use crate::proto::{type_proto, ModelProto, NodeProto, ValueInfoProto};
use crate::tensor::onnx_dtype_name;
use crate::{ops, OnnxError};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// A graph input or output as the file declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueDecl {
    pub name: String,
    /// The ONNX element type's name (`FLOAT`, `INT64` …), or what the value is instead.
    pub dtype: String,
    /// Each dim: its size, its `dim_param` name, or `name:k` when it has neither (the
    /// symbol rlx gives it, which `--dim` accepts too). None: unknown rank.
    pub dims: Option<Vec<String>>,
}

/// A model's table of contents.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    pub inputs: Vec<ValueDecl>,
    pub outputs: Vec<ValueDecl>,
    pub opsets: Vec<(String, i64)>,
    /// `(domain-qualified op type, node count)`, by op type.
    pub op_counts: Vec<(String, usize)>,
    /// Op types no translator maps: `(op, reason)`.
    pub unknown_ops: Vec<(String, String)>,
}

/// Decode an `.onnx` file without importing it.
pub fn read_model(path: &Path) -> Result<ModelProto, OnnxError> {
    let bytes = std::fs::read(path).map_err(|e| OnnxError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    ModelProto::decode(bytes.as_slice()).map_err(|e| OnnxError::Decode {
        what: path.display().to_string(),
        msg: e.to_string(),
    })
}

fn decl(v: &ValueInfoProto) -> ValueDecl {
    let name = v.name.clone().unwrap_or_default();
    let (dtype, dims) = match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => {
            let dims = t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .enumerate()
                    .map(|(k, d)| match &d.value {
                        Some(D::DimValue(n)) if *n >= 0 => n.to_string(),
                        Some(D::DimParam(p)) if !p.is_empty() => p.clone(),
                        _ => format!("{name}:{k}"),
                    })
                    .collect()
            });
            (onnx_dtype_name(t.elem_type.unwrap_or(0)), dims)
        }
        Some(type_proto::Value::SequenceType(_)) => ("sequence".into(), None),
        Some(type_proto::Value::MapType(_)) => ("map".into(), None),
        Some(type_proto::Value::OptionalType(_)) => ("optional".into(), None),
        Some(_) => ("sparse tensor".into(), None),
        None => ("no type".into(), None),
    };
    ValueDecl { name, dtype, dims }
}

/// The graph inputs that are not initializers.
fn real_inputs(model: &ModelProto) -> Vec<&ValueInfoProto> {
    let Some(g) = &model.graph else {
        return vec![];
    };
    let inits: std::collections::HashSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    g.input
        .iter()
        .filter(|v| !inits.contains(v.name.as_deref().unwrap_or("")))
        .collect()
}

/// Inputs, outputs, opsets, op counts and the op types no translator maps.
pub fn info(model: &ModelProto) -> ModelInfo {
    let g = model.graph.clone().unwrap_or_default();
    let opsets: Vec<(String, i64)> = model
        .opset_import
        .iter()
        .map(|o| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(1)))
        .collect();
    let registry = ops::registry();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut unknown: BTreeMap<String, String> = BTreeMap::new();
    for n in &g.node {
        let op = n.op_type.clone().unwrap_or_default();
        let domain = n.domain.clone().unwrap_or_default();
        let key = if domain.is_empty() || domain == "ai.onnx" {
            op.clone()
        } else {
            format!("{domain}::{op}")
        };
        *counts.entry(key.clone()).or_default() += 1;
        if registry.contains_key(key.as_str()) {
            continue;
        }
        if key != op {
            unknown.insert(key, format!("domain \"{domain}\" is not imported"));
        } else {
            unknown.insert(key, "no translator for this op type".into());
        }
    }
    ModelInfo {
        inputs: real_inputs(model).into_iter().map(decl).collect(),
        outputs: g.output.iter().map(decl).collect(),
        opsets,
        op_counts: counts.into_iter().collect(),
        unknown_ops: unknown.into_iter().collect(),
    }
}

/// Fix input dims to sizes before import: `dims` maps a symbol (a `dim_param`, or the
/// `name:k` of an unnamed dim) to a size, `shapes` an input name to its whole shape (for
/// files whose symbols are shared or meaningless, e.g. `?` for both height and width). A
/// whole shape must keep the rank and every static size. Returns the symbols still free.
pub fn fix_dims(
    model: &mut ModelProto,
    dims: &HashMap<String, usize>,
    shapes: &HashMap<String, Vec<usize>>,
) -> Result<Vec<String>, OnnxError> {
    let inputs: Vec<String> = real_inputs(model)
        .iter()
        .filter_map(|v| v.name.clone())
        .collect();
    for name in shapes.keys() {
        if !inputs.contains(name) {
            return Err(OnnxError::Graph(format!(
                "--shape names \"{name}\", which is not a graph input (inputs: {})",
                inputs.join(", ")
            )));
        }
    }
    let mut free = vec![];
    let mut used: Vec<&str> = vec![];
    let Some(g) = model.graph.as_mut() else {
        return Err(OnnxError::Graph("the model has no graph".into()));
    };
    for v in g.input.iter_mut().filter(|v| {
        v.name
            .as_ref()
            .is_some_and(|n| inputs.iter().any(|i| i == n))
    }) {
        let name = v.name.clone().unwrap_or_default();
        let Some(type_proto::Value::TensorType(t)) =
            v.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        let Some(shape) = t.shape.as_mut() else {
            continue;
        };
        let whole = shapes.get(&name);
        if let Some(w) = whole {
            if w.len() != shape.dim.len() {
                return Err(OnnxError::Graph(format!(
                    "--shape {name}: {} dims given, the input has {}",
                    w.len(),
                    shape.dim.len()
                )));
            }
        }
        for (k, d) in shape.dim.iter_mut().enumerate() {
            let symbol = match &d.value {
                Some(D::DimValue(n)) if *n >= 0 => {
                    if let Some(w) = whole.filter(|w| w[k] as i64 != *n) {
                        return Err(OnnxError::Graph(format!(
                            "--shape {name}: dim {k} is {n} in the model, {} given",
                            w[k]
                        )));
                    }
                    continue;
                }
                Some(D::DimParam(p)) if !p.is_empty() => p.clone(),
                _ => format!("{name}:{k}"),
            };
            let size = match whole {
                Some(w) => {
                    if let Some((s, _)) = dims.get_key_value(&symbol) {
                        used.push(s.as_str());
                    }
                    Some(w[k])
                }
                None => dims.get_key_value(&symbol).map(|(s, &n)| {
                    used.push(s.as_str());
                    n
                }),
            };
            match size {
                Some(n) => d.value = Some(D::DimValue(n as i64)),
                None if !free.contains(&symbol) => free.push(symbol),
                None => {}
            }
        }
    }
    for s in dims.keys() {
        if !used.contains(&s.as_str()) {
            return Err(OnnxError::Graph(format!(
                "--dim {s}: no input has a symbolic dim of that name"
            )));
        }
    }
    Ok(free)
}

/// The number of rows of the table an integer input indexes, when the input feeds a
/// `Gather` (axis 0) as indices of an initializer (an embedding lookup): `(node, rows)`.
/// Random ids must lie in `0..rows` for the model to mean anything.
pub fn index_range(model: &ModelProto, input: &str) -> Option<(String, usize)> {
    let g = model.graph.as_ref()?;
    let gathers = |n: &&NodeProto| {
        n.op_type.as_deref() == Some("Gather") && n.input.get(1).map(String::as_str) == Some(input)
    };
    for n in g.node.iter().filter(gathers) {
        let axis = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("axis"))
            .and_then(|a| a.i)
            .unwrap_or(0);
        let data = n.input.first()?;
        let init = g
            .initializer
            .iter()
            .find(|t| t.name.as_ref() == Some(data))?;
        if axis == 0 && !init.dims.is_empty() && init.dims[0] > 0 {
            let node = n.name.clone().unwrap_or_else(|| data.clone());
            return Some((node, init.dims[0] as usize));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        tensor_shape_proto::Dimension, type_proto::Tensor, GraphProto, OperatorSetIdProto,
        TensorProto, TensorShapeProto, TypeProto,
    };

    fn input(name: &str, elem: i32, dims: Vec<Option<D>>) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(Tensor {
                    elem_type: Some(elem),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .into_iter()
                            .map(|value| Dimension {
                                value,
                                ..Default::default()
                            })
                            .collect(),
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn node(op: &str, domain: &str, ins: &[&str], out: &str) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            domain: Some(domain.into()),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            ..Default::default()
        }
    }

    /// ids [batch, seq] → Gather(table[50, 4]) → a made-up op and a contrib op.
    fn model() -> ModelProto {
        ModelProto {
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            }],
            graph: Some(GraphProto {
                input: vec![
                    input("ids", 7, vec![Some(D::DimParam("batch".into())), None]),
                    input(
                        "img",
                        1,
                        vec![Some(D::DimValue(3)), Some(D::DimParam("?".into()))],
                    ),
                ],
                initializer: vec![TensorProto {
                    name: Some("table".into()),
                    dims: vec![50, 4],
                    data_type: Some(1),
                    float_data: vec![0.5; 200],
                    ..Default::default()
                }],
                node: vec![
                    node("Gather", "", &["table", "ids"], "e"),
                    node("NoSuchOp", "", &["e"], "f"),
                    node("FusedGelu", "com.microsoft", &["f"], "y"),
                    node("Relu", "", &["img"], "z"),
                ],
                output: vec![input("y", 1, vec![None])],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn info_lists_symbols_counts_and_unknown_ops() {
        let m = model();
        let i = info(&m);
        assert_eq!(i.inputs.len(), 2);
        assert_eq!(i.inputs[0].dims, Some(vec!["batch".into(), "ids:1".into()]));
        assert_eq!(i.inputs[0].dtype, "INT64");
        assert_eq!(i.opsets, vec![(String::new(), 17)]);
        let count = |k: &str| i.op_counts.iter().find(|c| c.0 == k).map(|c| c.1);
        assert_eq!(count("Gather"), Some(1));
        assert_eq!(count("com.microsoft::FusedGelu"), Some(1));
        let unknown: Vec<&str> = i.unknown_ops.iter().map(|u| u.0.as_str()).collect();
        assert_eq!(unknown, vec!["NoSuchOp", "com.microsoft::FusedGelu"]);
        assert_eq!(index_range(&m, "ids"), Some(("table".into(), 50)));
        assert_eq!(index_range(&m, "img"), None);
    }

    #[test]
    fn fix_dims_by_symbol_and_by_whole_shape() {
        let mut m = model();
        let dims = HashMap::from([("batch".to_string(), 2), ("ids:1".to_string(), 7)]);
        let shapes = HashMap::from([("img".to_string(), vec![3, 9])]);
        assert_eq!(fix_dims(&mut m, &dims, &shapes), Ok(vec![]));
        let i = info(&m);
        assert_eq!(i.inputs[0].dims, Some(vec!["2".into(), "7".into()]));
        assert_eq!(i.inputs[1].dims, Some(vec!["3".into(), "9".into()]));
        // Left free, misnamed, wrong rank, contradicting a static size.
        let mut m = model();
        let free = fix_dims(&mut m, &HashMap::new(), &HashMap::new()).unwrap();
        assert_eq!(free, vec!["batch", "ids:1", "?"]);
        let bad_dim = HashMap::from([("seq".to_string(), 2)]);
        assert!(fix_dims(&mut model(), &bad_dim, &HashMap::new()).is_err());
        for shape in [vec![3], vec![4, 9]] {
            let s = HashMap::from([("img".to_string(), shape)]);
            assert!(fix_dims(&mut model(), &HashMap::new(), &s).is_err());
        }
        let s = HashMap::from([("nope".to_string(), vec![1])]);
        assert!(fix_dims(&mut model(), &HashMap::new(), &s).is_err());
    }
}
