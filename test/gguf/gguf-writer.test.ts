import { mkdtemp, open, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readGgufFileInfo } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { float32ToFloat16Bits } from "../../src/gguf/float16.ts";
import type { GgufTensor } from "../../src/gguf/gguf-tensor.ts";
import { type GgufMetadata, gguf } from "../../src/gguf/gguf-value.ts";
import { writeGgufFile } from "../../src/gguf/gguf-writer.ts";
import { readGgufKeyTypes } from "./read-gguf-key-types.ts";

type NativeFloat16View = DataView & {
  setFloat16(offset: number, value: number, littleEndian?: boolean): void;
};

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-gguf-writer-"));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

const metadata: GgufMetadata = {
  "general.architecture": gguf.string("tollgate-test"),
  "general.alignment": gguf.u32(32),
  "test.u8": gguf.u8(255),
  "test.i8": gguf.i8(-128),
  "test.u16": gguf.u16(65_535),
  "test.i16": gguf.i16(-32_768),
  "test.u32": gguf.u32(4_294_967_295),
  "test.i32": gguf.i32(-2_147_483_648),
  "test.f32": gguf.f32(1.5),
  "test.f64": gguf.f64(0.1),
  "test.u64": gguf.u64(2n ** 64n - 1n),
  "test.i64": gguf.i64(-(2n ** 63n)),
  "test.bool": gguf.bool(true),
  "test.string": gguf.string("héllo, wörld ✓"),
  "test.strings": gguf.strings(["a", "", "Ġthe", "<|im_end|>"]),
  "test.i32s": gguf.numbers("i32", [1, -2, 3]),
  "test.f32s": gguf.numbers("f32", [0.5, -0.25]),
  "test.bools": gguf.bools([true, false]),
  "test.u64s": gguf.bigints("u64", [1n, 2n ** 40n]),
};

function rampTensor(name: string, dimensions: number[], type: "f32" | "f16"): GgufTensor {
  return {
    name,
    dimensions,
    type,
    fill(target, offset) {
      for (let index = 0; index < target.length; index++) target[index] = (offset + index) / 8 - 3;
    },
  };
}

// 3 x 5 elements of f32 (60 bytes: the next tensor needs padding), then a large f16 tensor that
// spans several write chunks, then a vector.
const tensors = [
  rampTensor("first.weight", [3, 5], "f32"),
  rampTensor("second.weight", [300, 400], "f16"),
  rampTensor("third.weight", [7], "f32"),
];

describe("writeGgufFile", () => {
  it("round-trips every metadata type through node-llama-cpp's reader", async () => {
    const path = join(folder, "types.gguf");
    await writeGgufFile({ path, metadata, tensors });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    expect(info.version).toBe(3);
    const test = (info.metadata as unknown as { test: Record<string, unknown> }).test;
    expect(test).toEqual({
      u8: 255,
      i8: -128,
      u16: 65_535,
      i16: -32_768,
      u32: 4_294_967_295,
      i32: -2_147_483_648,
      f32: 1.5,
      f64: 0.1,
      u64: 2n ** 64n - 1n,
      i64: -(2n ** 63n),
      bool: true,
      string: "héllo, wörld ✓",
      strings: ["a", "", "Ġthe", "<|im_end|>"],
      i32s: [1, -2, 3],
      f32s: [0.5, -0.25],
      bools: [true, false],
      u64s: [1n, 2n ** 40n],
    });
  });

  it("stores each value with exactly the GGUF type it was given", async () => {
    const path = join(folder, "key-types.gguf");
    await writeGgufFile({ path, metadata, tensors });
    const types = await readGgufKeyTypes(path);
    for (const [key, value] of Object.entries(metadata)) {
      expect(types.get(key), key).toEqual(
        value.type === "array" ? { type: "array", itemType: value.itemType } : { type: value.type },
      );
    }
  });

  it("writes tensor infos and aligned data that read back exactly", async () => {
    const path = join(folder, "tensors.gguf");
    const { bytes } = await writeGgufFile({ path, metadata, tensors });
    expect((await stat(path)).size).toBe(bytes);

    const info = await readGgufFileInfo(path, { logWarnings: false });
    expect(
      info.tensorInfo?.map(({ name, dimensions, ggmlType }) => ({ name, dimensions, ggmlType })),
    ).toEqual([
      { name: "first.weight", dimensions: [3, 5], ggmlType: 0 },
      { name: "second.weight", dimensions: [300, 400], ggmlType: 1 },
      { name: "third.weight", dimensions: [7], ggmlType: 0 },
    ]);
    const fileOffsets = info.tensorInfo!.map((tensor) => Number(tensor.fileOffset));
    for (const offset of fileOffsets) expect(offset % 32).toBe(0);
    expect(fileOffsets[1]! - fileOffsets[0]!).toBe(64);

    const file = await readFile(path);
    const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
    for (let index = 0; index < 15; index++) {
      expect(view.getFloat32(fileOffsets[0]! + index * 4, true)).toBe(index / 8 - 3);
    }
    for (const index of [0, 1, 65_535, 65_536, 119_999]) {
      const expected = float32ToFloat16Bits(index / 8 - 3);
      expect(view.getUint16(fileOffsets[1]! + index * 2, true)).toBe(expected);
    }
    expect(view.getFloat32(fileOffsets[2]! + 6 * 4, true)).toBe(6 / 8 - 3);
    expect(bytes).toBe(fileOffsets[2]! + 7 * 4);
  });

  it("is deterministic and leaves no temporary file behind", async () => {
    const first = join(folder, "same-1.gguf");
    const second = join(folder, "same-2.gguf");
    await writeGgufFile({ path: first, metadata, tensors });
    await writeGgufFile({ path: second, metadata, tensors });
    expect((await readFile(first)).equals(await readFile(second))).toBe(true);
    expect((await readdir(folder)).filter((name) => name.endsWith(".partial"))).toEqual([]);
  });

  it("rejects an out-of-range value, naming the key, and writes nothing", async () => {
    const path = join(folder, "invalid.gguf");
    await expect(
      writeGgufFile({ path, metadata: { ...metadata, "test.bad": gguf.u32(-1) }, tensors }),
    ).rejects.toThrow(/test\.bad/);
    await expect(stat(path)).rejects.toThrow();
  });

  it("removes the temporary file when tensor data cannot be produced", async () => {
    const subfolder = await mkdtemp(join(folder, "failing-"));
    const failing: GgufTensor = {
      name: "failing.weight",
      dimensions: [4],
      type: "f32",
      fill() {
        throw new Error("no data");
      },
    };
    await expect(
      writeGgufFile({ path: join(subfolder, "failing.gguf"), metadata, tensors: [failing] }),
    ).rejects.toThrow("no data");
    expect(await readdir(subfolder)).toEqual([]);
  });

  it("starts with the GGUF magic and version 3", async () => {
    const path = join(folder, "magic.gguf");
    await writeGgufFile({ path, metadata, tensors: [] });
    const handle = await open(path, "r");
    const header = Buffer.alloc(8);
    await handle.read(header, 0, 8, 0);
    await handle.close();
    expect(header.toString("latin1", 0, 4)).toBe("GGUF");
    expect(header.readUInt32LE(4)).toBe(3);
  });
});

describe("Q8_0 tensors", () => {
  it("store per block of 32 an f16 scale of max|x|/127 and the rounded int8 values", async () => {
    const path = join(folder, "q8.gguf");
    const values = Float32Array.from({ length: 64 }, (_, index) => (index < 32 ? (index - 16) / 4 : 0));
    values[40] = -2.54;
    const tensor: GgufTensor = {
      name: "quantized.weight",
      dimensions: [32, 2],
      type: "q8_0",
      fill(target, offset) {
        target.set(values.subarray(offset, offset + target.length));
      },
    };
    await writeGgufFile({ path, metadata, tensors: [tensor] });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    expect(info.tensorInfo?.[0]?.ggmlType).toBe(8);
    const file = await readFile(path);
    const start = Number(info.tensorInfo![0]!.fileOffset);
    expect(file.length - start).toBe(2 * 34);
    const view = new DataView(file.buffer, file.byteOffset + start);
    expect(view.getUint16(0, true)).toBe(float32ToFloat16Bits(4 / 127));
    // (index - 16) / 4 divided by 4/127: index 0 gives -127, index 17 gives 7.94, rounded to 8.
    expect(view.getInt8(2)).toBe(-127);
    expect(view.getInt8(2 + 17)).toBe(8);
    expect(view.getInt8(2 + 31)).toBe(119);
    expect(view.getInt8(2 + 16)).toBe(0);
    expect(view.getUint16(34, true)).toBe(float32ToFloat16Bits(2.54 / 127));
    expect(view.getInt8(36 + 8)).toBe(-127);
    expect(view.getInt8(36)).toBe(0);
  });

  it("refuses a row length that is not a multiple of 32", async () => {
    const tensor = { ...rampTensor("odd.weight", [48, 2], "f32"), type: "q8_0" as const };
    await expect(
      writeGgufFile({ path: join(folder, "odd.gguf"), metadata, tensors: [tensor] }),
    ).rejects.toThrow(/multiple of 32/);
  });
});

describe("float32ToFloat16Bits", () => {
  it("encodes special and boundary values like IEEE 754 binary16", () => {
    expect(float32ToFloat16Bits(0)).toBe(0x0000);
    expect(float32ToFloat16Bits(-0)).toBe(0x8000);
    expect(float32ToFloat16Bits(1)).toBe(0x3c00);
    expect(float32ToFloat16Bits(-2)).toBe(0xc000);
    expect(float32ToFloat16Bits(65_504)).toBe(0x7bff);
    expect(float32ToFloat16Bits(65_520)).toBe(0x7c00);
    expect(float32ToFloat16Bits(Number.NEGATIVE_INFINITY)).toBe(0xfc00);
    expect(float32ToFloat16Bits(2 ** -24)).toBe(0x0001);
    expect(float32ToFloat16Bits(2 ** -26)).toBe(0x0000);
    expect(float32ToFloat16Bits(Number.NaN) & 0x7c00).toBe(0x7c00);
    expect(float32ToFloat16Bits(Number.NaN) & 0x03ff).not.toBe(0);
  });

  it("matches the native conversion on many random values (round to nearest, ties to even)", () => {
    const view = new DataView(new ArrayBuffer(2)) as NativeFloat16View;
    let state = 12_345;
    for (let index = 0; index < 100_000; index++) {
      state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
      const magnitude = 2 ** ((state % 60) - 30);
      const value = Math.fround(((state / 4_294_967_296) * 2 - 1) * magnitude);
      view.setFloat16(0, value, true);
      expect(float32ToFloat16Bits(value)).toBe(view.getUint16(0, true));
    }
  });
});
