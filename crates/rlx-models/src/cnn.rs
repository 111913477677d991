//! The MNIST-style CNN: (conv 3×3 pad 1 → ReLU → max-pool 2×2) × 2 → linear, on
//! single-channel `rows × cols` images (8×8 digits, 28×28 MNIST / Fashion-MNIST).
use crate::{ModelError, ParamSpec};
use rlx_ir::{Activation, ConvSpec, DType, Graph, NodeId, Op, PoolKind, PoolSpec, ReduceOp, Shape};

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
        let [c1, c2] = self.channels;
        let (h, w) = self.pooled();
        let flat = c2 * h * w;
        let p = |name: &str, dims: Vec<usize>, fan_in: usize| ParamSpec {
            name: name.into(),
            dims,
            fan_in,
        };
        vec![
            p("conv1.weight", vec![c1, 1, 3, 3], 9),
            p("conv1.bias", vec![c1], 9),
            p("conv2.weight", vec![c2, c1, 3, 3], c1 * 9),
            p("conv2.bias", vec![c2], c1 * 9),
            p("fc.weight", vec![flat, self.classes], flat),
            p("fc.bias", vec![self.classes], flat),
        ]
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
        let mut ps: Vec<NodeId> = Vec::new();
        for p in self.params() {
            ps.push(g.param(p.name, Shape::new(&p.dims, DType::F32))?);
        }
        let conv = ConvSpec::new([3, 3]).padding([1, 1]);
        let pool = PoolSpec {
            kind: PoolKind::Max,
            kernel_size: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        };
        let mut h = x;
        for layer in 0..2 {
            h = g.add_node(Op::Conv(conv), &[h, ps[2 * layer], ps[2 * layer + 1]])?;
            h = g.activation(Activation::Relu, h)?;
            h = g.add_node(Op::Pool(pool), &[h])?;
        }
        let flat = self.params()[4].dims[0];
        let h = g.reshape(h, &[batch as i64, flat as i64])?;
        let logits = g.matmul_bias_act(h, ps[4], ps[5], None)?;
        if with_loss {
            let labels = g.input(LABELS, Shape::new(&[batch], DType::I64))?;
            let per = g.add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])?;
            let loss = g.add_node(
                Op::Reduce {
                    op: ReduceOp::Mean,
                    axes: vec![],
                    keep_dim: false,
                },
                &[per],
            )?;
            g.set_outputs(vec![loss, logits]);
        } else {
            g.set_outputs(vec![logits]);
        }
        Ok(g)
    }
}
