"""Write a copy of a GGUF file with every tensor stored as F32: quantized blocks decoded with
gguf-py's ggml formulas, metadata copied field by field. llama.cpp runs such a copy with f32
activations throughout (its F32 matrices take f32 x; no Q8 rounding of activations), which
makes it the reference for "the same weights, computed in f32" (scripts/llama_ref.py --exact).

    python3 scripts/gguf_to_f32.py IN.gguf OUT.gguf
"""

import sys

import numpy as np

import gguf
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType
from gguf.quants import dequantize


def copy_fields(r, w):
    for key, f in r.fields.items():
        # The header's own counts and the architecture (the writer adds both).
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == GGUFValueType.ARRAY else None
        val = f.contents()
        w.add_key_value(key, val, vtype, sub_type=sub)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    r = GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    copy_fields(r, w)
    w.add_file_type(0)  # LLAMA_FTYPE_ALL_F32
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # rows first, as numpy holds it
        if t.tensor_type in (GGMLQuantizationType.F32,):
            data = np.asarray(t.data, dtype=np.float32).reshape(shape)
        else:
            data = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        w.add_tensor(t.name, data, raw_dtype=GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {dst}: {len(r.tensors)} tensors as F32")


if __name__ == "__main__":
    main()
