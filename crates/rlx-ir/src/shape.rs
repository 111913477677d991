//! Shapes with static or symbolic dimensions.
use crate::DType;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// One dimension: a known size or a named symbol bound at compile or run time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    Static(usize),
    Dynamic(String),
}

impl Dim {
    pub fn dynamic(sym: impl Into<String>) -> Dim {
        Dim::Dynamic(sym.into())
    }
    pub fn as_static(&self) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Dynamic(_) => None,
        }
    }
    pub fn is_one(&self) -> bool {
        *self == Dim::Static(1)
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Static(n)
    }
}

impl From<&str> for Dim {
    fn from(s: &str) -> Dim {
        Dim::Dynamic(s.to_string())
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Dynamic(s) => write!(f, "{s}"),
        }
    }
}

/// Dimensions plus element type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub dims: Vec<Dim>,
    pub dtype: DType,
}

impl Shape {
    /// A fully static shape: `Shape::new(&[2, 3], DType::F32)`.
    pub fn new(dims: &[usize], dtype: DType) -> Shape {
        Shape {
            dims: dims.iter().map(|&d| Dim::Static(d)).collect(),
            dtype,
        }
    }

    /// A shape that may hold symbolic dims: `Shape::with_dims(vec![Dim::dynamic("B"), 8.into()], F32)`.
    pub fn with_dims(dims: Vec<Dim>, dtype: DType) -> Shape {
        Shape { dims, dtype }
    }

    pub fn scalar(dtype: DType) -> Shape {
        Shape {
            dims: vec![],
            dtype,
        }
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn is_static(&self) -> bool {
        self.dims.iter().all(|d| d.as_static().is_some())
    }

    /// Concrete sizes, or None while a dim is symbolic.
    pub fn static_dims(&self) -> Option<Vec<usize>> {
        self.dims.iter().map(Dim::as_static).collect()
    }

    /// Element count, or None while a dim is symbolic or when the count overflows `usize`
    /// (which a verified graph never holds: see [`Shape::check_size`]).
    pub fn numel(&self) -> Option<usize> {
        self.dims
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(d.as_static()?))
    }

    /// Size in bytes, or None while a dim is symbolic or when the size overflows `usize`.
    pub fn byte_size(&self) -> Option<usize> {
        self.numel()?.checked_mul(self.dtype.size_bytes())
    }

    /// The size limit every node of a verified graph keeps: its static dims, with a zero
    /// dim counted as 1, span at most `isize::MAX` bytes. Counting zeros as 1 keeps the row
    /// strides of an empty tensor (`[0, 2^40, 2^40]`) representable too, and a dim bound to
    /// a symbol later can only make the tensor larger or empty, so checking the static part
    /// now is never too strict for a tensor that could exist.
    pub fn check_size(&self) -> Result<(), String> {
        let span = self
            .dims
            .iter()
            .filter_map(Dim::as_static)
            .try_fold(self.dtype.size_bytes(), |n, d| n.checked_mul(d.max(1)));
        match span {
            Some(b) if b <= isize::MAX as usize => Ok(()),
            Some(b) => Err(format!(
                "{self} spans {b} bytes, more than the isize::MAX a tensor can hold"
            )),
            None => Err(format!("the byte size of {self} overflows usize")),
        }
    }

    pub fn with_dtype(&self, dtype: DType) -> Shape {
        Shape {
            dims: self.dims.clone(),
            dtype,
        }
    }

    /// Replace every symbol found in `bindings` by its size; unknown symbols stay symbolic.
    pub fn bind(&self, bindings: &HashMap<String, usize>) -> Shape {
        Shape {
            dims: self
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Dynamic(s) => bindings
                        .get(s)
                        .map(|&n| Dim::Static(n))
                        .unwrap_or_else(|| d.clone()),
                    s => s.clone(),
                })
                .collect(),
            dtype: self.dtype,
        }
    }

    /// Normalise a possibly negative axis against this rank.
    pub fn axis(&self, axis: i64) -> Result<usize, String> {
        normalize_axis(axis, self.rank())
    }
}

/// Map a NumPy-style axis (negative counts from the end) into `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    } else {
        Ok(a as usize)
    }
}

/// NumPy broadcasting of two concrete dim lists (batch dims once symbols are bound).
pub fn broadcast_static(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= r {
            s[i + s.len() - r]
        } else {
            1
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(format!(
                "dims {a:?} and {b:?} do not broadcast ({x} vs {y})"
            )),
        })
        .collect()
}

/// NumPy broadcasting of two dim lists. A symbol meets 1 → symbol; equal symbols agree;
/// a symbol against a static size > 1 takes the static size (checked again once bound).
pub fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.len() >= r {
            &a[i + a.len() - r]
        } else {
            &Dim::Static(1)
        };
        let db = if i + b.len() >= r {
            &b[i + b.len() - r]
        } else {
            &Dim::Static(1)
        };
        let d = if da == db || db.is_one() {
            da.clone()
        } else if da.is_one() {
            db.clone()
        } else {
            match (da, db) {
                (Dim::Static(x), Dim::Static(y)) => {
                    return Err(format!(
                        "cannot broadcast {} with {} (dim {x} vs {y})",
                        DimsFmt(a),
                        DimsFmt(b)
                    ))
                }
                (Dim::Static(_), Dim::Dynamic(_)) => da.clone(),
                (Dim::Dynamic(_), _) => db.clone(),
            }
        };
        out.push(d);
    }
    Ok(out)
}

/// Formats a dim list as `[2, S, 3]`.
pub struct DimsFmt<'a>(pub &'a [Dim]);

impl fmt::Display for DimsFmt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{d}")?;
        }
        write!(f, "]")
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, DimsFmt(&self.dims))
    }
}

/// Row-major strides of concrete dims. Dims that pass [`Shape::check_size`] never
/// overflow; saturation keeps anything else from panicking in a debug build.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1]);
    }
    s
}
