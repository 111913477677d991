//! The window generators (HannWindow, HammingWindow, BlackmanWindow): a table of a size
//! known at import time, built on the host as a constant.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::ImportCtx;
use rlx_ir::HostTensor;
use std::f64::consts::PI;

pub(super) fn register(r: &mut Registry) {
    r.insert("HannWindow", |c, n| window(c, n, Win::Hann));
    r.insert("HammingWindow", |c, n| window(c, n, Win::Hamming));
    r.insert("BlackmanWindow", |c, n| window(c, n, Win::Blackman));
}

#[derive(Clone, Copy)]
enum Win {
    Hann,
    Hamming,
    Blackman,
}

fn window(c: &mut ImportCtx, n: &NodeProto, w: Win) -> Translated {
    let size = c
        .const_input(n, 0)?
        .ok_or_else(|| c.err("needs input 0 (size)"))?;
    let size = match size.to_i64_vec()[..] {
        [s] if s >= 0 => s as usize,
        _ => return Err(c.err("size must be one non-negative integer")),
    };
    c.limit("a window", size)?;
    let a = Attrs(n);
    let dt = super::elementwise::cast_target(c, a.i_or("output_datatype", 1))?;
    // periodic: the window of size+1 without its last sample; symmetric: both ends equal.
    let periodic = a.i_or("periodic", 1) != 0;
    let m = if periodic {
        size
    } else {
        size.saturating_sub(1)
    } as f64;
    let vals: Vec<f64> = (0..size)
        .map(|i| {
            let x = 2.0 * PI * i as f64 / m;
            match w {
                Win::Hann => 0.5 - 0.5 * x.cos(),
                Win::Hamming => 25.0 / 46.0 - 21.0 / 46.0 * x.cos(),
                Win::Blackman => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
            }
        })
        .collect();
    one(c.constant(HostTensor::from_f64_as(&[size], &vals, dt))?)
}
