/** Tensor element types this writer can store (ggml_type ids 0 and 1). */
export type GgufTensorType = "f32" | "f16";

export const ggmlTypeIds = { f32: 0, f16: 1 } as const satisfies Record<GgufTensorType, number>;

export const ggmlTypeByteSizes = { f32: 4, f16: 2 } as const satisfies Record<GgufTensorType, number>;

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
