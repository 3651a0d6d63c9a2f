/** Scalar GGUF value types carried as a JavaScript `number`. */
export type GgufNumberType = "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "f64";
/** Scalar GGUF value types carried as a `bigint` (64-bit integers). */
export type GgufBigIntType = "u64" | "i64";
/** Every GGUF type an array may hold (GGUF forbids arrays of arrays in practice). */
export type GgufArrayItemType = GgufNumberType | GgufBigIntType | "bool" | "string";

/** One typed GGUF metadata value. The type is written to the file exactly as given. */
export type GgufValue =
  | { readonly type: GgufNumberType; readonly value: number }
  | { readonly type: GgufBigIntType; readonly value: bigint }
  | { readonly type: "bool"; readonly value: boolean }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "array"; readonly itemType: GgufNumberType; readonly value: readonly number[] }
  | { readonly type: "array"; readonly itemType: GgufBigIntType; readonly value: readonly bigint[] }
  | { readonly type: "array"; readonly itemType: "bool"; readonly value: readonly boolean[] }
  | { readonly type: "array"; readonly itemType: "string"; readonly value: readonly string[] };

/** Metadata in file order (string keys keep insertion order). */
export type GgufMetadata = Readonly<Record<string, GgufValue>>;

/** Numeric ids of the GGUF value types (`gguf_type` in ggml's gguf.h). */
export const ggufValueTypeIds = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;

export type GgufValueTypeName = keyof typeof ggufValueTypeIds;

/** Short constructors: `gguf.u32(64)`, `gguf.strings(["a", "b"])`. */
export const gguf = {
  u8: (value: number): GgufValue => ({ type: "u8", value }),
  i8: (value: number): GgufValue => ({ type: "i8", value }),
  u16: (value: number): GgufValue => ({ type: "u16", value }),
  i16: (value: number): GgufValue => ({ type: "i16", value }),
  u32: (value: number): GgufValue => ({ type: "u32", value }),
  i32: (value: number): GgufValue => ({ type: "i32", value }),
  f32: (value: number): GgufValue => ({ type: "f32", value }),
  f64: (value: number): GgufValue => ({ type: "f64", value }),
  u64: (value: bigint): GgufValue => ({ type: "u64", value }),
  i64: (value: bigint): GgufValue => ({ type: "i64", value }),
  bool: (value: boolean): GgufValue => ({ type: "bool", value }),
  string: (value: string): GgufValue => ({ type: "string", value }),
  numbers: (itemType: GgufNumberType, value: readonly number[]): GgufValue => ({
    type: "array",
    itemType,
    value,
  }),
  bigints: (itemType: GgufBigIntType, value: readonly bigint[]): GgufValue => ({
    type: "array",
    itemType,
    value,
  }),
  bools: (value: readonly boolean[]): GgufValue => ({ type: "array", itemType: "bool", value }),
  strings: (value: readonly string[]): GgufValue => ({ type: "array", itemType: "string", value }),
} as const;
