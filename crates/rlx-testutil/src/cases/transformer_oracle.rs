//! Geometry and f64 oracles of the transformer group: `Attn` (one attention problem: layout,
//! sizes, mask, scale, softcap) and `RopeCase` (x layout, cos/sin form, pairing), each with
//! its graph and a plain loop that writes the op's rules out (never rlx code), and SwiGLU's.
use rlx_ir::{AttentionLayout, AttentionSpec, DType, Graph, MaskKind, RopeStyle, Shape};

pub const LAYOUTS: [AttentionLayout; 3] = [
    AttentionLayout::Packed,
    AttentionLayout::Bshd,
    AttentionLayout::Bhsd,
];

/// One attention problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attn {
    pub layout: AttentionLayout,
    pub b: usize,
    pub sq: usize,
    pub sk: usize,
    pub h: usize,
    pub hkv: usize,
    pub d: usize,
    pub dv: usize,
    pub mask: MaskKind,
    pub scale: Option<f32>,
    pub cap: Option<f32>,
    /// Over a KV cache: an input `past` (I64 `[1]`) says how many positions precede the
    /// queries; only `past + sq` of the `sk` keys are valid.
    pub past: bool,
}

impl Attn {
    pub fn new(
        layout: AttentionLayout,
        b: usize,
        sq: usize,
        sk: usize,
        h: usize,
        hkv: usize,
        d: usize,
    ) -> Attn {
        Attn {
            layout,
            b,
            sq,
            sk,
            h,
            hkv,
            d,
            dv: d,
            mask: MaskKind::None,
            scale: None,
            cap: None,
            past: false,
        }
    }
    pub fn cached(self) -> Attn {
        Attn { past: true, ..self }
    }
    pub fn mask(self, mask: MaskKind) -> Attn {
        Attn { mask, ..self }
    }
    pub fn v_dim(self, dv: usize) -> Attn {
        Attn { dv, ..self }
    }
    pub fn scale(self, s: f32) -> Attn {
        Attn {
            scale: Some(s),
            ..self
        }
    }
    pub fn cap(self, c: f32) -> Attn {
        Attn {
            cap: Some(c),
            ..self
        }
    }
    pub fn dims(&self, heads: usize, seq: usize, size: usize) -> Vec<usize> {
        match self.layout {
            AttentionLayout::Packed => vec![self.b, seq, heads * size],
            AttentionLayout::Bshd => vec![self.b, seq, heads, size],
            AttentionLayout::Bhsd => vec![self.b, heads, seq, size],
        }
    }
    pub fn q_dims(&self) -> Vec<usize> {
        self.dims(self.h, self.sq, self.d)
    }
    pub fn k_dims(&self) -> Vec<usize> {
        self.dims(self.hkv, self.sk, self.d)
    }
    pub fn v_dims(&self) -> Vec<usize> {
        self.dims(self.hkv, self.sk, self.dv)
    }
    pub fn out_dims(&self) -> Vec<usize> {
        self.dims(self.h, self.sq, self.dv)
    }
    pub fn spec(&self) -> AttentionSpec {
        let mut s = AttentionSpec::new(self.h, self.d)
            .layout(self.layout)
            .mask(self.mask);
        if self.dv != self.d {
            s = s.v_head_dim(self.dv);
        }
        if let Some(x) = self.scale {
            s = s.scale(x);
        }
        if let Some(c) = self.cap {
            s = s.softcap(c);
        }
        if self.past {
            s = s.with_past();
        }
        s
    }
    /// Inputs `q`, `k`, `v` in `dt` (and `mask` `[B, Sk]` in `mask_dt` for Custom).
    pub fn graph(&self, dt: DType, mask_dt: DType) -> Graph {
        let mut g = Graph::new("attention");
        let q = g.input("q", Shape::new(&self.q_dims(), dt)).unwrap();
        let k = g.input("k", Shape::new(&self.k_dims(), dt)).unwrap();
        let v = g.input("v", Shape::new(&self.v_dims(), dt)).unwrap();
        let m = (self.mask == MaskKind::Custom).then(|| {
            g.input("mask", Shape::new(&[self.b, self.sk], mask_dt))
                .unwrap()
        });
        let o = if self.past {
            let p = g.input("past", Shape::new(&[1], DType::I64)).unwrap();
            let mut ins = vec![q, k, v];
            ins.extend(m);
            ins.push(p);
            g.add_node(rlx_ir::Op::Attention(self.spec()), &ins)
                .unwrap()
        } else {
            g.attention(q, k, v, m, self.spec()).unwrap()
        };
        g.set_outputs(vec![o]);
        g
    }

    /// Flat index of element (b, h, s, e) of a tensor with `heads` heads, `seq` positions
    /// and head size `size`, stored in this layout.
    pub fn idx(
        &self,
        p: (usize, usize, usize, usize),
        heads: usize,
        seq: usize,
        size: usize,
    ) -> usize {
        let (b, h, s, e) = p;
        match self.layout {
            // [B, S, H*D]: head h owns columns h*D .. h*D + D of row (b, s).
            AttentionLayout::Packed => (b * seq + s) * (heads * size) + h * size + e,
            AttentionLayout::Bshd => ((b * seq + s) * heads + h) * size + e,
            AttentionLayout::Bhsd => ((b * heads + h) * seq + s) * size + e,
        }
    }

    /// Plain f64 attention: explicit loops, the mask rules of `MaskKind` written out. Rows
    /// that see no key are zeros.
    pub fn oracle(&self, q: &[f64], k: &[f64], v: &[f64], keep: Option<&[f64]>) -> Vec<f64> {
        self.oracle_past(q, k, v, keep, None)
    }

    /// The oracle over a KV cache holding `past` positions before the queries: only the
    /// first `past + sq` keys exist, and query i sits at `past + i`.
    pub fn oracle_past(
        &self,
        q: &[f64],
        k: &[f64],
        v: &[f64],
        keep: Option<&[f64]>,
        past: Option<usize>,
    ) -> Vec<f64> {
        let c = self;
        let valid = past.map_or(c.sk, |p| p + c.sq);
        let scale = c.scale.map_or(1.0 / (c.d as f64).sqrt(), |s| s as f64);
        let mut out = vec![f64::NAN; c.b * c.sq * c.h * c.dv];
        for b in 0..c.b {
            for h in 0..c.h {
                let kvh = h / (c.h / c.hkv);
                for i in 0..c.sq {
                    // Queries are the last Sq of the valid positions.
                    let pos = valid as i64 - c.sq as i64 + i as i64;
                    let mut logits: Vec<(usize, f64)> = vec![];
                    for j in 0..valid {
                        let jj = j as i64;
                        let visible = match c.mask {
                            MaskKind::None => true,
                            MaskKind::Causal => jj <= pos,
                            MaskKind::SlidingWindow(w) => jj <= pos && pos - jj < w as i64,
                            MaskKind::Custom => keep.unwrap()[b * c.sk + j] != 0.0,
                        };
                        if !visible {
                            continue;
                        }
                        let mut s = 0.0;
                        for e in 0..c.d {
                            s += q[c.idx((b, h, i, e), c.h, c.sq, c.d)]
                                * k[c.idx((b, kvh, j, e), c.hkv, c.sk, c.d)];
                        }
                        s *= scale;
                        if let Some(cap) = c.cap {
                            let cap = cap as f64;
                            s = cap * (s / cap).tanh();
                        }
                        logits.push((j, s));
                    }
                    let m = logits.iter().map(|l| l.1).fold(f64::NEG_INFINITY, f64::max);
                    let den: f64 = logits.iter().map(|l| (l.1 - m).exp()).sum();
                    for e in 0..c.dv {
                        let mut acc = 0.0;
                        for &(j, s) in &logits {
                            acc +=
                                (s - m).exp() / den * v[c.idx((b, kvh, j, e), c.hkv, c.sk, c.dv)];
                        }
                        out[c.idx((b, h, i, e), c.h, c.sq, c.dv)] = acc;
                    }
                }
            }
        }
        out
    }
}

/// How Rope's x is laid out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum XLayout {
    /// `[B, H, S, D]`
    Bhsd,
    /// `[B, S, H, D]`
    Bshd,
    /// `[B, S, H*D]`
    Packed,
    /// `[S, H*D]`: packed without a batch axis (B must be 1).
    Rows,
}

pub const XLAYOUTS: [XLayout; 3] = [XLayout::Bhsd, XLayout::Bshd, XLayout::Packed];
pub const STYLES: [RopeStyle; 2] = [RopeStyle::Half, RopeStyle::Interleaved];

/// The shape cos/sin take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CosForm {
    /// `[S, half]` for Bhsd, `[S, 1, half]` for the others.
    Seq,
    /// `[S, half]` whatever the layout (a single packed head, `[S, D]` rows).
    Seq2d,
    /// A batch axis: `[B, 1, S, half]` for Bhsd, `[B, S, 1, half]` for the others.
    PerBatch,
}

/// One Rope problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeCase {
    pub layout: XLayout,
    pub b: usize,
    pub s: usize,
    pub h: usize,
    pub d: usize,
    pub n_rot: usize,
    pub style: RopeStyle,
    pub cos: CosForm,
}

impl RopeCase {
    pub fn new(
        layout: XLayout,
        (b, s, h, d): (usize, usize, usize, usize),
        n_rot: usize,
        style: RopeStyle,
    ) -> RopeCase {
        RopeCase {
            layout,
            b,
            s,
            h,
            d,
            n_rot,
            style,
            cos: CosForm::Seq,
        }
    }
    pub fn cos(self, cos: CosForm) -> RopeCase {
        RopeCase { cos, ..self }
    }
    pub fn x_dims(&self) -> Vec<usize> {
        match self.layout {
            XLayout::Bhsd => vec![self.b, self.h, self.s, self.d],
            XLayout::Bshd => vec![self.b, self.s, self.h, self.d],
            XLayout::Packed => vec![self.b, self.s, self.h * self.d],
            XLayout::Rows => vec![self.s, self.h * self.d],
        }
    }
    pub fn cos_dims(&self) -> Vec<usize> {
        let half = self.n_rot / 2;
        match (self.layout, self.cos) {
            (_, CosForm::Seq2d) | (XLayout::Bhsd, CosForm::Seq) => vec![self.s, half],
            (XLayout::Bhsd, CosForm::PerBatch) => vec![self.b, 1, self.s, half],
            (_, CosForm::Seq) => vec![self.s, 1, half],
            (_, CosForm::PerBatch) => vec![self.b, self.s, 1, half],
        }
    }
    /// Inputs `x` in `dt`, `cos` and `sin` in `cos_dt`.
    pub fn graph(&self, dt: DType, cos_dt: DType) -> Graph {
        let (xd, cd) = (self.x_dims(), self.cos_dims());
        let mut g = Graph::new("rope");
        let x = g.input("x", Shape::new(&xd, dt)).unwrap();
        let c = g.input("cos", Shape::new(&cd, cos_dt)).unwrap();
        let s = g.input("sin", Shape::new(&cd, cos_dt)).unwrap();
        let o = g.rope(x, c, s, self.d, self.n_rot, self.style).unwrap();
        g.set_outputs(vec![o]);
        g
    }
    fn x_index(&self, b: usize, s: usize, h: usize, e: usize) -> usize {
        let (hh, ss, dd) = (self.h, self.s, self.d);
        match self.layout {
            XLayout::Bhsd => ((b * hh + h) * ss + s) * dd + e,
            XLayout::Bshd => ((b * ss + s) * hh + h) * dd + e,
            XLayout::Packed | XLayout::Rows => (b * ss + s) * (hh * dd) + h * dd + e,
        }
    }
    /// Index into cos/sin of angle i at (b, s); the broadcast axes are all size 1.
    fn angle_index(&self, b: usize, s: usize, i: usize) -> usize {
        let half = self.n_rot / 2;
        match self.cos {
            CosForm::PerBatch => (b * self.s + s) * half + i,
            _ => s * half + i,
        }
    }

    /// Plain f64 RoPE with the pairing of each style written out; dims past n_rot pass.
    pub fn oracle(&self, x: &[f64], cos: &[f64], sin: &[f64]) -> Vec<f64> {
        let c = self;
        let half = c.n_rot / 2;
        let mut out = vec![f64::NAN; x.len()];
        for b in 0..c.b {
            for s in 0..c.s {
                for h in 0..c.h {
                    let xv = |e: usize| x[c.x_index(b, s, h, e)];
                    let cs = |i: usize| (cos[c.angle_index(b, s, i)], sin[c.angle_index(b, s, i)]);
                    for e in 0..c.d {
                        let val = if e >= c.n_rot {
                            xv(e)
                        } else {
                            match c.style {
                                RopeStyle::Half => {
                                    let (co, si) = cs(e % half);
                                    if e < half {
                                        xv(e) * co - xv(e + half) * si
                                    } else {
                                        xv(e) * co + xv(e - half) * si
                                    }
                                }
                                RopeStyle::Interleaved => {
                                    let (co, si) = cs(e / 2);
                                    if e % 2 == 0 {
                                        xv(e) * co - xv(e + 1) * si
                                    } else {
                                        xv(e) * co + xv(e - 1) * si
                                    }
                                }
                            }
                        };
                        out[c.x_index(b, s, h, e)] = val;
                    }
                }
            }
        }
        out
    }
}

/// Plain f64 SwiGLU of rows `[up ‖ gate]` (or `[gate ‖ up]`): `up · gate / (1 + e^−gate)`.
pub fn swiglu_ref(x: &[f64], two_n: usize, gate_first: bool) -> Vec<f64> {
    let n = two_n / 2;
    let mut want = Vec::with_capacity(x.len() / 2);
    for row in x.chunks(two_n) {
        for j in 0..n {
            let (u, gt) = if gate_first {
                (row[n + j], row[j])
            } else {
                (row[j], row[n + j])
            };
            want.push(u * gt / (1.0 + (-gt).exp()));
        }
    }
    want
}
