//! The per-op case tables, one file per op group, and `case_tests!`, which turns a group's
//! case sets into one `#[test]` per set for a device, in the manner of candle's
//! `test_device!`:
//!
//! ```ignore
//! use rlx_testutil::run::cpu;      // in rlx-cpu/tests: CPU vs the f64 oracle
//! rlx_testutil::case_tests!(elementwise, cpu);
//! use rlx_testutil::run::grad;     // in rlx-autodiff/tests: finite differences
//! rlx_testutil::case_tests!(elementwise, grad);
//! rlx_testutil::case_tests!(elementwise, cuda); // in rlx-cuda/tests: `cuda::check` parity
//! ```
//!
//! A device is a module in scope at the call with `pub fn check(set: &str, cases: &[Case])`.
//! `cpu` and `grad` are the oracle and gradcheck checks; every other name is a device
//! parity check. A new op adds its cases to its group's file (and a new set's name to the
//! list below); a new backend writes its `check` and calls `case_tests!` for every group.
pub mod audio;
pub mod audio_oracle;
pub mod elementwise;
pub mod elementwise_oracle;
pub mod index;
pub mod index_composite;
pub mod index_int;
pub mod index_oracle;
pub mod linalg;
pub mod linalg_oracle;
pub mod norm;
pub mod norm_oracle;
pub mod quant_oracle;
pub mod reduce;
pub mod reduce_oracle;
pub mod region;
pub mod region_oracle;
pub mod shape;
pub mod shape_oracle;
pub mod transformer;
pub mod transformer_cache;
pub mod transformer_oracle;
pub mod transformer_rope;
pub mod vision;
pub mod vision_oracle;

/// One `#[test]` per case set of a group, for a device (see the module doc). Set flags
/// leave a set out of a check none of its cases take: `nooracle`, `noparity`, `nograd`.
#[macro_export]
macro_rules! case_tests {
    (elementwise, $dev:ident) => {
        $crate::case_tests!(@group $dev, elementwise,
            activation [],
            activation_big [nooracle nograd],
            binary [],
            compare [nograd],
            where_select [],
            cast [nograd],
            stop_gradient [nograd],
        );
    };
    (region, $dev:ident) => {
        $crate::case_tests!(@group $dev, region,
            chain [nograd],
            casts [nograd],
            compare_where [nograd],
            integer_chain [nograd],
            mixed [nograd],
            resize [nograd],
            batch [nograd],
            large [nograd],
            big [nooracle nograd],
        );
    };
    (audio, $dev:ident) => {
        $crate::case_tests!(@group $dev, audio,
            fft [],
            fft_round_trip [nograd],
            fft_big [nooracle nograd],
            log_mel [],
            log_mel_backward [nograd],
        );
    };
    (transformer, $dev:ident) => {
        $crate::case_tests!(@group $dev, transformer,
            attention_masks [nograd],
            attention_head_dims [nooracle nograd],
            attention_gqa [nograd],
            attention_decode [nograd],
            attention_empty_rows [nograd],
            attention_custom [nograd],
            attention_v_dim [nograd],
            attention_scale_softcap [nograd],
            attention_storage [nograd],
            attention_large [nograd],
            attention_big [nooracle nograd],
            attention_grad [],
            attention_cached [nograd],
            cache_write [nograd],
            rope_cache_write [nograd],
            cached_attention [nograd],
            rope_full [nograd],
            rope_partial [nograd],
            rope_per_batch [nograd],
            rope_large [nograd],
            rope_storage [nograd],
            rope_single_head [nograd],
            rope_grad [],
            rope_styles [nograd noparity],
            swiglu [],
        );
    };
    (vision, $dev:ident) => {
        $crate::case_tests!(@group $dev, vision,
            conv [],
            conv_backward_input [nograd],
            conv_backward_weight [nograd],
            conv_big [nooracle nograd],
            pool [],
            max_pool_backward [nograd],
            pool_big [nooracle nograd],
            resize [],
        );
    };
    (reduce, $dev:ident) => {
        $crate::case_tests!(@group $dev, reduce,
            reduce [],
            reduce_big [nooracle nograd],
            reduce_int [nograd],
            softmax [],
            argmax [nograd],
            cross_entropy [],
            cross_entropy_backward [nograd],
        );
    };
    (norm, $dev:ident) => {
        $crate::case_tests!(@group $dev, norm,
            layer_norm [],
            rms_norm [],
            fused_residual_ln [],
            fused_residual_rms_norm [],
        );
    };
    (linalg, $dev:ident) => {
        $crate::case_tests!(@group $dev, linalg,
            matmul [],
            fused_matmul_bias_act [],
            dequant_matmul [nograd],
            dequantize [nograd],
        );
    };
    (shape, $dev:ident) => {
        $crate::case_tests!(@group $dev, shape,
            reshape [],
            expand [],
            transpose [],
            narrow [],
            concat [],
            gather [],
            pad [],
            slice [],
        );
    };
    (index, $dev:ident) => {
        $crate::case_tests!(@group $dev, index,
            tile [],
            gather_elements [],
            gather_nd [],
            scatter_elements [],
            scatter_nd [],
            top_k [],
            cumsum [],
            range [],
            one_hot [],
            int_binary [],
            depth_to_space [],
            group_norms [],
            einsum [],
        );
    };
    (@group $dev:ident, $g:ident, $($set:ident [$($flag:ident)*]),* $(,)?) => {
        mod $g {
            $( $crate::case_tests!(@one $dev, $g, $set, [$($flag)*]); )*
        }
    };
    // Flags are read one at a time: a flag naming this device's check drops the set.
    (@one cpu, $g:ident, $set:ident, [nooracle $($rest:ident)*]) => {};
    (@one grad, $g:ident, $set:ident, [nograd $($rest:ident)*]) => {};
    (@one cpu, $g:ident, $set:ident, [$f:ident $($rest:ident)*]) => {
        $crate::case_tests!(@one cpu, $g, $set, [$($rest)*]);
    };
    (@one grad, $g:ident, $set:ident, [$f:ident $($rest:ident)*]) => {
        $crate::case_tests!(@one grad, $g, $set, [$($rest)*]);
    };
    (@one $dev:ident, $g:ident, $set:ident, [noparity $($rest:ident)*]) => {};
    (@one $dev:ident, $g:ident, $set:ident, [$f:ident $($rest:ident)*]) => {
        $crate::case_tests!(@one $dev, $g, $set, [$($rest)*]);
    };
    (@one $dev:ident, $g:ident, $set:ident, []) => {
        #[test]
        fn $set() {
            super::$dev::check(
                concat!(stringify!($g), "::", stringify!($set)),
                &$crate::cases::$g::$set(),
            );
        }
    };
}

/// A shape written inline in a case table.
pub type Dims = &'static [usize];

/// Row-major multi-index of flat position `k`.
pub fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

pub fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Flat index into an input of dims `ins` broadcast to `out`, for output element `k`.
pub fn src_index(ins: &[usize], out: &[usize], k: usize) -> usize {
    let mut idx = vec![0; out.len()];
    let mut rem = k;
    for d in (0..out.len()).rev() {
        idx[d] = rem % out[d];
        rem /= out[d];
    }
    let off = out.len() - ins.len();
    let mut s = 0;
    for i in 0..ins.len() {
        let j = if ins[i] == 1 { 0 } else { idx[i + off] };
        s = s * ins[i] + j;
    }
    s
}

/// Numpy broadcast of two shapes (the table's expected output dims).
pub fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() < r {
            1
        } else {
            s[i + s.len() - r]
        }
    };
    (0..r).map(|i| at(a, i).max(at(b, i))).collect()
}
