"""Write a small GGUF with the Python `gguf` package (gguf-py, llama.cpp's own writer), for
crates/rlx-io/tests/gguf.rs (`reads_a_file_written_by_gguf_py`): metadata of several types
(a nested array included) and F32 / F16 / Q8_0 tensors whose element i is i * 0.25.
Usage: python3 gguf_sample.py OUT.gguf"""
import sys

import numpy as np
import gguf
from gguf.constants import GGMLQuantizationType as T

out = sys.argv[1]
w = gguf.GGUFWriter(out, "llama")
w.add_name("rlx gguf-py sample")
w.add_uint32("test.u32", 123456)
w.add_int32("test.i32", -42)
w.add_float32("test.f32", 0.5)
w.add_uint64("test.u64", 1 << 40)
w.add_float64("test.f64", 2.25)
w.add_bool("test.bool", True)
w.add_array("test.strings", ["a", "βγ", ""])
w.add_array("test.ints", [1, -2, 3])
w.add_array("test.floats", [0.5, 1.5])
w.add_array("test.nested", [[1, 2], [3]])


def ramp(rows, cols):
    return (np.arange(rows * cols, dtype=np.float32) * 0.25).reshape(rows, cols)


w.add_tensor("t.f32", ramp(3, 4))
w.add_tensor("t.f16", ramp(2, 8).astype(np.float16))
q8 = gguf.quants.quantize(ramp(2, 64), T.Q8_0)
w.add_tensor("t.q8_0", q8, raw_dtype=T.Q8_0)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print("wrote", out)
