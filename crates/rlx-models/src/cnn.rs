//! The MNIST-style CNN: (conv 3×3 pad 1 → ReLU → max-pool 2×2) × 2 → linear, on
//! single-channel `rows × cols` images (8×8 digits, 28×28 MNIST / Fashion-MNIST).
use crate::{ModelError, ParamSpec, VarBuilder};
use rlx_ir::{Activation, ConvSpec, DType, Graph, NodeId, Op, PoolKind, PoolSpec, ReduceOp, Shape};

/// A layer's weight and bias nodes.
struct Layer {
    weight: NodeId,
    bias: NodeId,
}

/// The CNN's param nodes, as `CnnConfig::declare` made them.
struct CnnParams {
    conv: [Layer; 2],
    fc: Layer,
    /// Features entering the linear layer.
    flat: usize,
}

/// Image input name (`[B, 1, rows, cols]`).
pub const IMAGES: &str = "images";
/// Integer label input name (`[B]`, I64), present when the graph computes the loss.
pub const LABELS: &str = "labels";

/// Sizes of the CNN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnnConfig {
    pub rows: usize,
    pub cols: usize,
    /// Output channels of the two conv layers.
    pub channels: [usize; 2],
    pub classes: usize,
}

impl CnnConfig {
    /// The 8×8 digits setting.
    pub fn digits() -> CnnConfig {
        CnnConfig {
            rows: 8,
            cols: 8,
            channels: [32, 64],
            classes: 10,
        }
    }
    /// The 28×28 MNIST / Fashion-MNIST setting.
    pub fn mnist() -> CnnConfig {
        CnnConfig {
            rows: 28,
            cols: 28,
            channels: [16, 32],
            classes: 10,
        }
    }

    /// Spatial size after the two 2×2 pools (floor, as the pool op computes it).
    fn pooled(&self) -> (usize, usize) {
        (self.rows / 4, self.cols / 4)
    }

    fn check(&self) -> Result<(), ModelError> {
        let (h, w) = self.pooled();
        if h == 0 || w == 0 {
            return Err(ModelError::Config(format!(
                "{}x{} images are too small for two 2x2 pools (need at least 4x4)",
                self.rows, self.cols
            )));
        }
        if self.channels.contains(&0) || self.classes < 2 {
            return Err(ModelError::Config(format!(
                "channels {:?} and classes {} must be positive (classes >= 2)",
                self.channels, self.classes
            )));
        }
        Ok(())
    }

    /// The learnable params with their shapes and fan-in, in a fixed order.
    pub fn params(&self) -> Vec<ParamSpec> {
        let vb = VarBuilder::new(Graph::new("cnn_params"), DType::F32);
        // Declaring into a fresh graph only fails for a name declared twice, which
        // `declare` never does; an empty list is then the trainer's "no params" error.
        match self.declare(&vb) {
            Ok(_) => vb.finish().1,
            Err(_) => Vec::new(),
        }
    }

    /// Declare every param (the one place their names and shapes are written).
    fn declare(&self, vb: &VarBuilder) -> Result<CnnParams, ModelError> {
        let [c1, c2] = self.channels;
        let (h, w) = self.pooled();
        let flat = c2.saturating_mul(h).saturating_mul(w);
        let conv = |name: &str, cin: usize, cout: usize| -> Result<Layer, ModelError> {
            let vb = vb.pp(name);
            let fan_in = cin * 9;
            Ok(Layer {
                weight: vb.param("weight", &[cout, cin, 3, 3], fan_in)?,
                bias: vb.param("bias", &[cout], fan_in)?,
            })
        };
        let conv = [conv("conv1", 1, c1)?, conv("conv2", c1, c2)?];
        let vb = vb.pp("fc");
        let fc = Layer {
            weight: vb.param("weight", &[flat, self.classes], flat)?,
            bias: vb.param("bias", &[self.classes], flat)?,
        };
        Ok(CnnParams { conv, fc, flat })
    }

    /// The graph for a batch of `batch` images. With `with_loss` it takes `labels` too and
    /// outputs `[mean cross-entropy loss, logits]`; without, it outputs `[logits]`.
    pub fn build(&self, batch: usize, with_loss: bool) -> Result<Graph, ModelError> {
        self.check()?;
        if batch == 0 {
            return Err(ModelError::Config("batch size must be positive".into()));
        }
        let mut g = Graph::new(if with_loss { "cnn_train" } else { "cnn_eval" });
        let x = g.input(
            IMAGES,
            Shape::new(&[batch, 1, self.rows, self.cols], DType::F32),
        )?;
        let vb = VarBuilder::new(g, DType::F32);
        let ps = self.declare(&vb)?;
        let (mut g, _) = vb.finish();
        let conv = ConvSpec::new([3, 3]).padding([1, 1]);
        let pool = PoolSpec {
            kind: PoolKind::Max,
            kernel_size: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        };
        let mut h = x;
        for layer in &ps.conv {
            h = g.add_node(Op::Conv(conv), &[h, layer.weight, layer.bias])?;
            h = g.activation(Activation::Relu, h)?;
            h = g.add_node(Op::Pool(pool), &[h])?;
        }
        let h = g.reshape(h, &[batch as i64, ps.flat as i64])?;
        let logits = g.matmul_bias_act(h, ps.fc.weight, ps.fc.bias, None)?;
        if with_loss {
            let loss = mean_cross_entropy(&mut g, logits, batch)?;
            g.set_outputs(vec![loss, logits]);
        } else {
            g.set_outputs(vec![logits]);
        }
        Ok(g)
    }
}

/// The classifiers' training loss: softmax cross-entropy of `logits` `[batch, classes]`
/// against the I64 input `LABELS` `[batch]`, averaged over the batch.
pub fn mean_cross_entropy(
    g: &mut Graph,
    logits: NodeId,
    batch: usize,
) -> Result<NodeId, ModelError> {
    let labels = g.input(LABELS, Shape::new(&[batch], DType::I64))?;
    let per = g.add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])?;
    Ok(g.add_node(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: vec![],
            keep_dim: false,
        },
        &[per],
    )?)
}
