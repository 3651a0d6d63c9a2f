import { readFile } from "node:fs/promises";
import { type GgufValueTypeName, ggufValueTypeIds } from "../../src/gguf/gguf-value.ts";

/** The stored GGUF type of one metadata key; arrays also carry their item type. */
export type GgufKeyType = { readonly type: GgufValueTypeName; readonly itemType?: GgufValueTypeName };

const typeNames = new Map<number, GgufValueTypeName>(
  Object.entries(ggufValueTypeIds).map(([name, id]) => [id, name as GgufValueTypeName]),
);

const scalarSizes: Partial<Record<GgufValueTypeName, number>> = {
  u8: 1,
  i8: 1,
  bool: 1,
  u16: 2,
  i16: 2,
  u32: 4,
  i32: 4,
  f32: 4,
  u64: 8,
  i64: 8,
  f64: 8,
};

/**
 * Reads the metadata section of a GGUF file and returns each key's stored type, which
 * node-llama-cpp's `readGgufFileInfo` does not expose (a u32 and an i32 both come back as a
 * number). Test helper: reads the whole file into memory.
 */
export async function readGgufKeyTypes(path: string): Promise<Map<string, GgufKeyType>> {
  const buffer = await readFile(path);
  let offset = 0;
  const u32 = (): number => {
    const value = buffer.readUInt32LE(offset);
    offset += 4;
    return value;
  };
  const u64 = (): number => {
    const value = Number(buffer.readBigUInt64LE(offset));
    offset += 8;
    return value;
  };
  const string = (): string => {
    const length = u64();
    const value = buffer.toString("utf8", offset, offset + length);
    offset += length;
    return value;
  };
  const typeName = (id: number): GgufValueTypeName => {
    const name = typeNames.get(id);
    if (name === undefined) throw new Error(`unknown GGUF value type ${id} at offset ${offset}`);
    return name;
  };
  const skip = (type: GgufValueTypeName): void => {
    if (type === "string") {
      string();
      return;
    }
    const size = scalarSizes[type];
    if (size === undefined) throw new Error(`cannot skip a nested ${type}`);
    offset += size;
  };

  if (buffer.toString("latin1", 0, 4) !== "GGUF") throw new Error("not a GGUF file");
  offset = 4;
  const version = u32();
  if (version !== 3) throw new Error(`unsupported GGUF version ${version}`);
  u64(); // tensor count
  const keyCount = u64();
  const types = new Map<string, GgufKeyType>();
  for (let index = 0; index < keyCount; index++) {
    const key = string();
    const type = typeName(u32());
    if (type === "array") {
      const itemType = typeName(u32());
      const length = u64();
      for (let item = 0; item < length; item++) skip(itemType);
      types.set(key, { type, itemType });
    } else {
      skip(type);
      types.set(key, { type });
    }
  }
  return types;
}
