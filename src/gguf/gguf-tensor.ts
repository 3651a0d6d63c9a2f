/**
 * Tensor element types this writer can store: `f32`, `f16`, and `q8_0` (blocks of 32 values
 * stored as an f16 scale and 32 int8s; the innermost dimension must be a multiple of 32).
 */
export type GgufTensorType = "f32" | "f16" | "q8_0";

/** `ggml_type` ids. */
export const ggmlTypeIds = { f32: 0, f16: 1, q8_0: 8 } as const satisfies Record<GgufTensorType, number>;

/** Elements per block and bytes per block of each type. */
export const ggmlTypeBlocks = {
  f32: { elements: 1, bytes: 4 },
  f16: { elements: 1, bytes: 2 },
  q8_0: { elements: 32, bytes: 34 },
} as const satisfies Record<GgufTensorType, { elements: number; bytes: number }>;

/** Bytes taken by `elementCount` elements of `type` (a whole number of blocks). */
export function countTensorBytes(type: GgufTensorType, elementCount: number): number {
  const block = ggmlTypeBlocks[type];
  return (elementCount / block.elements) * block.bytes;
}

/**
 * A tensor to write. Its data is produced on demand, chunk by chunk, so a large tensor never
 * has to exist in memory as a whole.
 */
export type GgufTensor = {
  readonly name: string;
  /**
   * Dimensions in ggml order: `dimensions[0]` (ne[0]) is the innermost, contiguous one. A
   * matrix that maps `n_in` to `n_out` values is `[n_in, n_out]`.
   */
  readonly dimensions: readonly number[];
  readonly type: GgufTensorType;
  /**
   * Writes the elements `[offset, offset + target.length)` (flat, ggml order) into `target`.
   * Called with increasing offsets that together cover the tensor exactly once.
   */
  readonly fill: (target: Float32Array, offset: number) => void;
};

/** Number of elements of a tensor. */
export function countTensorElements(dimensions: readonly number[]): number {
  return dimensions.reduce((product, dimension) => product * dimension, 1);
}
