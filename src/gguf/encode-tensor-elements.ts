import { float32ToFloat16Bits } from "./float16.ts";
import { type GgufTensorType, ggmlTypeBlocks } from "./gguf-tensor.ts";

/** Encodes values as the bytes of `type`; the length must be a whole number of blocks. */
export function encodeTensorElements(values: Float32Array, type: GgufTensorType): Uint8Array {
  switch (type) {
    case "f32": {
      const bytes = new Uint8Array(values.length * 4);
      const view = new DataView(bytes.buffer);
      for (let index = 0; index < values.length; index++) view.setFloat32(index * 4, values[index]!, true);
      return bytes;
    }
    case "f16": {
      const bytes = new Uint8Array(values.length * 2);
      const view = new DataView(bytes.buffer);
      for (let index = 0; index < values.length; index++) {
        view.setUint16(index * 2, float32ToFloat16Bits(values[index]!), true);
      }
      return bytes;
    }
    case "q8_0":
      return encodeQ8_0(values);
    default: {
      const exhaustive: never = type;
      throw new Error(`unsupported tensor type ${String(exhaustive)}`);
    }
  }
}

/**
 * Q8_0 as ggml's `quantize_row_q8_0_ref`: per block of 32, `d = max|x| / 127` stored as f16,
 * then `round(x / d)` as int8 (halves rounded away from zero, like C's `roundf`).
 */
function encodeQ8_0(values: Float32Array): Uint8Array {
  const { elements, bytes: blockBytes } = ggmlTypeBlocks.q8_0;
  const blockCount = values.length / elements;
  const bytes = new Uint8Array(blockCount * blockBytes);
  const view = new DataView(bytes.buffer);
  const quants = new Int8Array(bytes.buffer);
  for (let block = 0; block < blockCount; block++) {
    const start = block * elements;
    let maximum = 0;
    for (let index = 0; index < elements; index++) {
      const magnitude = Math.abs(values[start + index]!);
      if (magnitude > maximum) maximum = magnitude;
    }
    const scale = Math.fround(maximum / 127);
    const inverse = scale === 0 ? 0 : Math.fround(1 / scale);
    const offset = block * blockBytes;
    view.setUint16(offset, float32ToFloat16Bits(scale), true);
    for (let index = 0; index < elements; index++) {
      const scaled = Math.fround(values[start + index]! * inverse);
      quants[offset + 2 + index] = scaled < 0 ? -Math.floor(0.5 - scaled) : Math.floor(scaled + 0.5);
    }
  }
  return bytes;
}
