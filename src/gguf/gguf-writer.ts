import { randomUUID } from "node:crypto";
import { type FileHandle, open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { makeFolder } from "../files/make-folder.ts";
import { encodeTensorElements } from "./encode-tensor-elements.ts";
import {
  countTensorBytes,
  countTensorElements,
  type GgufTensor,
  ggmlTypeBlocks,
  ggmlTypeIds,
} from "./gguf-tensor.ts";
import { type GgufArrayItemType, type GgufMetadata, type GgufValue, ggufValueTypeIds } from "./gguf-value.ts";

/** Default tensor data alignment of GGUF when `general.alignment` is absent. */
export const ggufDefaultAlignment = 32;

const ggufMagic = 0x46_55_47_47; // "GGUF" read as a little-endian u32
const ggufVersion = 3;
const elementsPerChunk = 1 << 16;
const outputBufferBytes = 1 << 20;

export type WriteGgufFileOptions = {
  /** Destination; written to a temporary file in the same folder, then renamed into place. */
  readonly path: string;
  /**
   * Key/values in file order. `general.alignment` (u32), when present, sets the tensor data
   * alignment; otherwise GGUF's default of 32 bytes applies.
   */
  readonly metadata: GgufMetadata;
  readonly tensors: readonly GgufTensor[];
};

export type WriteGgufFileResult = {
  /** Size of the written file in bytes. */
  readonly bytes: number;
};

/**
 * Writes a GGUF v3 file: header, typed metadata, tensor infos, then the aligned tensor data,
 * streamed in chunks. The file appears atomically (temporary file + rename); on failure the
 * temporary file is removed.
 */
export async function writeGgufFile(options: WriteGgufFileOptions): Promise<WriteGgufFileResult> {
  const alignment = readAlignment(options.metadata);
  const layout = layOutTensors(options.tensors, alignment);
  const header = encodeHeader(options.metadata, layout, alignment);

  // The folder is made if need be: `models make-test ./models/tiny.gguf` on a fresh checkout.
  await makeFolder(dirname(options.path));
  const temporaryPath = join(dirname(options.path), `.${basename(options.path)}.${randomUUID()}.partial`);
  const handle = await open(temporaryPath, "w");
  try {
    const output = new BufferedFileWriter(handle);
    await output.write(header);
    for (const entry of layout.entries) {
      await output.writeZeros(entry.absoluteOffset(header.length) - output.position);
      await writeTensorData(output, entry.tensor);
    }
    await output.flush();
    await handle.close();
    await rename(temporaryPath, options.path);
    return { bytes: output.position };
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(temporaryPath, { force: true });
    throw error;
  }
}

type TensorLayoutEntry = {
  readonly tensor: GgufTensor;
  /** Offset relative to the start of the tensor data section. */
  readonly relativeOffset: number;
  readonly byteLength: number;
  absoluteOffset(headerLength: number): number;
};

type TensorLayout = { readonly entries: readonly TensorLayoutEntry[] };

function readAlignment(metadata: GgufMetadata): number {
  const value = metadata["general.alignment"];
  if (value === undefined) return ggufDefaultAlignment;
  if (value.type !== "u32" || !Number.isInteger(value.value) || value.value <= 0) {
    throw new Error("general.alignment must be a positive u32");
  }
  if ((value.value & (value.value - 1)) !== 0) {
    throw new Error(`general.alignment must be a power of two, got ${value.value}`);
  }
  return value.value;
}

function alignUp(offset: number, alignment: number): number {
  return Math.ceil(offset / alignment) * alignment;
}

function layOutTensors(tensors: readonly GgufTensor[], alignment: number): TensorLayout {
  const names = new Set<string>();
  let offset = 0;
  const entries = tensors.map((tensor): TensorLayoutEntry => {
    if (names.has(tensor.name)) throw new Error(`duplicate tensor name: ${tensor.name}`);
    names.add(tensor.name);
    if (tensor.dimensions.length === 0 || tensor.dimensions.length > 4) {
      throw new Error(`tensor ${tensor.name} must have 1 to 4 dimensions`);
    }
    for (const dimension of tensor.dimensions) {
      if (!Number.isSafeInteger(dimension) || dimension <= 0) {
        throw new Error(`tensor ${tensor.name} has an invalid dimension: ${dimension}`);
      }
    }
    const blockElements = ggmlTypeBlocks[tensor.type].elements;
    if (tensor.dimensions[0]! % blockElements !== 0) {
      throw new Error(
        `tensor ${tensor.name}: ${tensor.type} needs ne[0] to be a multiple of ${blockElements}`,
      );
    }
    const relativeOffset = alignUp(offset, alignment);
    const byteLength = countTensorBytes(tensor.type, countTensorElements(tensor.dimensions));
    offset = relativeOffset + byteLength;
    return {
      tensor,
      relativeOffset,
      byteLength,
      absoluteOffset: (headerLength) => alignUp(headerLength, alignment) + relativeOffset,
    };
  });
  return { entries };
}

function encodeHeader(metadata: GgufMetadata, layout: TensorLayout, alignment: number): Uint8Array {
  const encoder = new ByteEncoder();
  encoder.u32(ggufMagic);
  encoder.u32(ggufVersion);
  encoder.u64(BigInt(layout.entries.length));
  const entries = Object.entries(metadata);
  encoder.u64(BigInt(entries.length));
  for (const [key, value] of entries) {
    encoder.string(key);
    encodeValue(encoder, key, value);
  }
  for (const entry of layout.entries) {
    encoder.string(entry.tensor.name);
    encoder.u32(entry.tensor.dimensions.length);
    for (const dimension of entry.tensor.dimensions) encoder.u64(BigInt(dimension));
    encoder.u32(ggmlTypeIds[entry.tensor.type]);
    encoder.u64(BigInt(entry.relativeOffset));
  }
  const bytes = encoder.finish();
  // Pad the header to the alignment so the data section starts where readers expect it.
  const padded = new Uint8Array(alignUp(bytes.length, alignment));
  padded.set(bytes);
  return padded;
}

function encodeValue(encoder: ByteEncoder, key: string, value: GgufValue): void {
  encoder.u32(ggufValueTypeIds[value.type]);
  switch (value.type) {
    case "array":
      encoder.u32(ggufValueTypeIds[value.itemType]);
      encoder.u64(BigInt(value.value.length));
      for (const item of value.value) encodeScalar(encoder, key, value.itemType, item);
      return;
    default:
      encodeScalar(encoder, key, value.type, value.value);
  }
}

function encodeScalar(
  encoder: ByteEncoder,
  key: string,
  type: GgufArrayItemType,
  value: number | bigint | boolean | string,
): void {
  const invalid = (): Error => new Error(`metadata ${key}: ${String(value)} is not a valid ${type}`);
  switch (type) {
    case "string":
      if (typeof value !== "string") throw invalid();
      encoder.string(value);
      return;
    case "bool":
      if (typeof value !== "boolean") throw invalid();
      encoder.u8(value ? 1 : 0);
      return;
    case "u64":
    case "i64": {
      if (typeof value !== "bigint") throw invalid();
      const [minimum, maximum] = type === "u64" ? [0n, 2n ** 64n - 1n] : [-(2n ** 63n), 2n ** 63n - 1n];
      if (value < minimum || value > maximum) throw invalid();
      if (type === "u64") encoder.u64(value);
      else encoder.i64(value);
      return;
    }
    case "f32":
    case "f64":
      if (typeof value !== "number") throw invalid();
      if (type === "f32") encoder.f32(value);
      else encoder.f64(value);
      return;
    case "u8":
    case "i8":
    case "u16":
    case "i16":
    case "u32":
    case "i32": {
      if (typeof value !== "number" || !Number.isInteger(value)) throw invalid();
      const [minimum, maximum] = integerRanges[type];
      if (value < minimum || value > maximum) throw invalid();
      encoder.integer(type, value);
      return;
    }
    default: {
      const exhaustive: never = type;
      throw new Error(`unknown GGUF type ${String(exhaustive)}`);
    }
  }
}

const integerRanges = {
  u8: [0, 0xff],
  i8: [-0x80, 0x7f],
  u16: [0, 0xffff],
  i16: [-0x8000, 0x7fff],
  u32: [0, 0xffff_ffff],
  i32: [-0x8000_0000, 0x7fff_ffff],
} as const;

/** Little-endian encoder into a growable buffer (used for the header only). */
class ByteEncoder {
  private buffer = new Uint8Array(1 << 16);
  private view = new DataView(this.buffer.buffer);
  private length = 0;

  private reserve(byteCount: number): number {
    const start = this.length;
    if (start + byteCount > this.buffer.length) {
      const grown = new Uint8Array(Math.max(this.buffer.length * 2, start + byteCount));
      grown.set(this.buffer.subarray(0, start));
      this.buffer = grown;
      this.view = new DataView(grown.buffer);
    }
    this.length += byteCount;
    return start;
  }

  u8(value: number): void {
    this.view.setUint8(this.reserve(1), value);
  }

  u32(value: number): void {
    this.view.setUint32(this.reserve(4), value, true);
  }

  u64(value: bigint): void {
    this.view.setBigUint64(this.reserve(8), value, true);
  }

  i64(value: bigint): void {
    this.view.setBigInt64(this.reserve(8), value, true);
  }

  f32(value: number): void {
    this.view.setFloat32(this.reserve(4), value, true);
  }

  f64(value: number): void {
    this.view.setFloat64(this.reserve(8), value, true);
  }

  integer(type: keyof typeof integerRanges, value: number): void {
    switch (type) {
      case "u8":
        this.view.setUint8(this.reserve(1), value);
        break;
      case "i8":
        this.view.setInt8(this.reserve(1), value);
        break;
      case "u16":
        this.view.setUint16(this.reserve(2), value, true);
        break;
      case "i16":
        this.view.setInt16(this.reserve(2), value, true);
        break;
      case "u32":
        this.view.setUint32(this.reserve(4), value, true);
        break;
      case "i32":
        this.view.setInt32(this.reserve(4), value, true);
        break;
    }
  }

  /** GGUF string: u64 byte length, then UTF-8 bytes without a terminator. */
  string(value: string): void {
    const bytes = Buffer.from(value, "utf8");
    this.u64(BigInt(bytes.length));
    this.buffer.set(bytes, this.reserve(bytes.length));
  }

  finish(): Uint8Array {
    return this.buffer.slice(0, this.length);
  }
}

async function writeTensorData(output: BufferedFileWriter, tensor: GgufTensor): Promise<void> {
  const elementCount = countTensorElements(tensor.dimensions);
  const values = new Float32Array(Math.min(elementsPerChunk, elementCount));
  for (let offset = 0; offset < elementCount; offset += values.length) {
    const chunk = values.subarray(0, Math.min(values.length, elementCount - offset));
    tensor.fill(chunk, offset);
    await output.write(encodeTensorElements(chunk, tensor.type));
  }
}

/** Collects small writes into one buffer and writes it out sequentially. */
class BufferedFileWriter {
  private readonly handle: FileHandle;
  private readonly buffer = new Uint8Array(outputBufferBytes);
  private used = 0;
  /** Bytes accepted so far (written or buffered). */
  position = 0;

  constructor(handle: FileHandle) {
    this.handle = handle;
  }

  async write(bytes: Uint8Array): Promise<void> {
    let offset = 0;
    while (offset < bytes.length) {
      const count = Math.min(bytes.length - offset, this.buffer.length - this.used);
      this.buffer.set(bytes.subarray(offset, offset + count), this.used);
      this.used += count;
      offset += count;
      if (this.used === this.buffer.length) await this.flush();
    }
    this.position += bytes.length;
  }

  async writeZeros(byteCount: number): Promise<void> {
    if (byteCount < 0) throw new Error("tensor data would overlap");
    if (byteCount > 0) await this.write(new Uint8Array(byteCount));
  }

  async flush(): Promise<void> {
    let offset = 0;
    while (offset < this.used) {
      const { bytesWritten } = await this.handle.write(this.buffer, offset, this.used - offset);
      offset += bytesWritten;
    }
    this.used = 0;
  }
}
