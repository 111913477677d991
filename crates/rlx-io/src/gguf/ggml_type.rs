//! ggml tensor types: the id stored in a GGUF tensor entry, and each type's block (elements
//! per block, bytes per block), from which a tensor's byte size follows. Ids and sizes are
//! ggml's (`ggml.h` / `ggml-common.h`, as listed in gguf-py's `GGML_QUANT_SIZES`).
//!
//! An id not listed here (a type newer than this reader, or one ggml removed: 4, 5, 31–33,
//! 36–38) does not fail the parse: the tensor is listed with its raw id and asking for its
//! size or data is a [`super::GgufError::UnknownType`].

/// The variant names are ggml's own (`Q4_K`, `IQ2_XXS`) so they grep across projects.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

/// (type, id, elements per block, bytes per block, name).
const TABLE: &[(GgmlType, u32, u64, u64, &str)] = {
    use GgmlType::*;
    &[
        (F32, 0, 1, 4, "F32"),
        (F16, 1, 1, 2, "F16"),
        (Q4_0, 2, 32, 18, "Q4_0"),
        (Q4_1, 3, 32, 20, "Q4_1"),
        (Q5_0, 6, 32, 22, "Q5_0"),
        (Q5_1, 7, 32, 24, "Q5_1"),
        (Q8_0, 8, 32, 34, "Q8_0"),
        // ggml-common.h: two f16 (d, s) and 32 i8. (gguf-py still says 40, from when d and s
        // were f32; no file stores Q8_1, it is a matmul scratch type.)
        (Q8_1, 9, 32, 36, "Q8_1"),
        (Q2_K, 10, 256, 84, "Q2_K"),
        (Q3_K, 11, 256, 110, "Q3_K"),
        (Q4_K, 12, 256, 144, "Q4_K"),
        (Q5_K, 13, 256, 176, "Q5_K"),
        (Q6_K, 14, 256, 210, "Q6_K"),
        (Q8_K, 15, 256, 292, "Q8_K"),
        (IQ2_XXS, 16, 256, 66, "IQ2_XXS"),
        (IQ2_XS, 17, 256, 74, "IQ2_XS"),
        (IQ3_XXS, 18, 256, 98, "IQ3_XXS"),
        (IQ1_S, 19, 256, 50, "IQ1_S"),
        (IQ4_NL, 20, 32, 18, "IQ4_NL"),
        (IQ3_S, 21, 256, 110, "IQ3_S"),
        (IQ2_S, 22, 256, 82, "IQ2_S"),
        (IQ4_XS, 23, 256, 136, "IQ4_XS"),
        (I8, 24, 1, 1, "I8"),
        (I16, 25, 1, 2, "I16"),
        (I32, 26, 1, 4, "I32"),
        (I64, 27, 1, 8, "I64"),
        (F64, 28, 1, 8, "F64"),
        (IQ1_M, 29, 256, 56, "IQ1_M"),
        (BF16, 30, 1, 2, "BF16"),
        (TQ1_0, 34, 256, 54, "TQ1_0"),
        (TQ2_0, 35, 256, 66, "TQ2_0"),
        (MXFP4, 39, 32, 17, "MXFP4"),
    ]
};

impl GgmlType {
    /// Every known type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|e| e.0)
    }

    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE.iter().find(|e| e.1 == id).map(|e| e.0)
    }

    fn entry(self) -> &'static (GgmlType, u32, u64, u64, &'static str) {
        // Every variant has a row (the table test checks it), so the fallback is unreachable;
        // it keeps the lookup total without a panic path.
        TABLE.iter().find(|e| e.0 == self).unwrap_or(&TABLE[0])
    }

    pub fn id(self) -> u32 {
        self.entry().1
    }

    /// Elements per block (1 for the plain types).
    pub fn block_size(self) -> u64 {
        self.entry().2
    }

    /// Bytes per block.
    pub fn type_size(self) -> u64 {
        self.entry().3
    }

    /// ggml's name for it ("Q4_K").
    pub fn name(self) -> &'static str {
        self.entry().4
    }

    /// Bytes of `n_elements` elements, or None when `n_elements` is not whole blocks or
    /// the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let b = self.block_size();
        if !n_elements.is_multiple_of(b) {
            return None;
        }
        (n_elements / b).checked_mul(self.type_size())
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A ggml type that is no packed [`rlx_ir::QuantScheme`]: a plain type (F32, F16, …, which
/// load as ordinary tensors) or a quantisation rlx does not implement (Q2_K, IQ*, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "ggml type {ty} is not a quantisation rlx runs (supported: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, \
     Q4_K, Q5_K, Q6_K; F32/F16/BF16 load as plain tensors)"
)]
pub struct UnsupportedQuant {
    pub ty: GgmlType,
}

impl TryFrom<GgmlType> for rlx_ir::QuantScheme {
    type Error = UnsupportedQuant;
    fn try_from(ty: GgmlType) -> Result<Self, UnsupportedQuant> {
        use rlx_ir::QuantScheme as Q;
        Ok(match ty {
            GgmlType::Q8_0 => Q::Q8_0,
            GgmlType::Q4_0 => Q::Q4_0,
            GgmlType::Q4_1 => Q::Q4_1,
            GgmlType::Q5_0 => Q::Q5_0,
            GgmlType::Q5_1 => Q::Q5_1,
            GgmlType::Q4_K => Q::Q4_K,
            GgmlType::Q5_K => Q::Q5_K,
            GgmlType::Q6_K => Q::Q6_K,
            _ => return Err(UnsupportedQuant { ty }),
        })
    }
}

#[cfg(test)]
mod quant_scheme_tests {
    use super::*;
    use rlx_ir::QuantScheme;

    /// The mapping agrees with both tables: same block length and bytes, and every block
    /// scheme has exactly one ggml type.
    #[test]
    fn quant_schemes_map_with_matching_layouts() {
        let mut seen = vec![];
        for ty in GgmlType::all() {
            match QuantScheme::try_from(ty) {
                Ok(s) => {
                    assert_eq!(s.block_len() as u64, ty.block_size(), "{ty}");
                    assert_eq!(s.block_bytes() as u64, ty.type_size(), "{ty}");
                    assert_eq!(format!("{s:?}"), ty.name());
                    seen.push(s);
                }
                Err(e) => assert_eq!(e.ty, ty),
            }
        }
        // The half schemes hold plain F16 / BF16 tensors, which GGUF files store as plain
        // types (a decoder packs them itself), so only the block formats map from ggml types.
        let blocks: Vec<QuantScheme> = QuantScheme::ALL
            .into_iter()
            .filter(|s| !s.is_half())
            .collect();
        assert_eq!(seen.len(), blocks.len());
        assert!(blocks.iter().all(|s| seen.contains(s)));
        let e = QuantScheme::try_from(GgmlType::Q2_K).unwrap_err();
        assert!(e.to_string().contains("Q2_K"), "{e}");
    }
}
