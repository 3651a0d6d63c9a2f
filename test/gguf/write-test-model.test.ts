import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readGgufFileInfo } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { byteCharacters, fromByteLevel, preTokenize, toByteLevel } from "../../src/gguf/byte-level-bpe.ts";
import { checkModelFile } from "../../src/gguf/check-model-file.ts";
import { getTestModelVocabulary } from "../../src/gguf/test-model-vocabulary.ts";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";
import { readGgufKeyTypes } from "./read-gguf-key-types.ts";

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-test-model-"));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

describe("writeTestModel", () => {
  it("writes the same bytes for the same seed and different bytes for another seed", async () => {
    const first = await writeTestModel({ path: join(folder, "seed-1a.gguf"), seed: 1 });
    await writeTestModel({ path: join(folder, "seed-1b.gguf") });
    await writeTestModel({ path: join(folder, "seed-2.gguf"), seed: 2 });
    const [bytes1a, bytes1b, bytes2] = await Promise.all(
      ["seed-1a.gguf", "seed-1b.gguf", "seed-2.gguf"].map((name) => readFile(join(folder, name))),
    );
    expect(bytes1a!.equals(bytes1b!)).toBe(true);
    expect(bytes1a!.equals(bytes2!)).toBe(false);
    expect(bytes2!.length).toBe(bytes1a!.length);
    expect(first.bytes).toBe(bytes1a!.length);
    expect((await readdir(folder)).filter((name) => name.endsWith(".partial"))).toEqual([]);
  });

  it("reports its size, parameters, vocabulary and trained context", async () => {
    const path = join(folder, "info.gguf");
    const info = await writeTestModel({ path });
    expect(info.path).toBe(path);
    expect(info.bytes).toBe((await stat(path)).size);
    expect(info.contextLength).toBe(2048);
    expect(info.vocabularySize).toBe(getTestModelVocabulary().tokens.length);
    expect(info.parameters).toBeGreaterThan(300_000);
    expect(info.parameters).toBeLessThan(2_000_000);
  });

  it("stores llama hyperparameters with the GGUF types llama.cpp reads", async () => {
    const path = join(folder, "types.gguf");
    await writeTestModel({ path });
    const types = await readGgufKeyTypes(path);
    const u32Keys = [
      "general.alignment",
      "llama.context_length",
      "llama.embedding_length",
      "llama.block_count",
      "llama.feed_forward_length",
      "llama.attention.head_count",
      "llama.attention.head_count_kv",
      "llama.rope.dimension_count",
      "tokenizer.ggml.bos_token_id",
      "tokenizer.ggml.eos_token_id",
      "tokenizer.ggml.eot_token_id",
      "tokenizer.ggml.padding_token_id",
    ];
    for (const key of u32Keys) expect(types.get(key), key).toEqual({ type: "u32" });
    for (const key of ["llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base"]) {
      expect(types.get(key), key).toEqual({ type: "f32" });
    }
    expect(types.get("tokenizer.ggml.token_type")).toEqual({ type: "array", itemType: "i32" });
    expect(types.get("tokenizer.ggml.tokens")).toEqual({ type: "array", itemType: "string" });
    expect(types.get("tokenizer.ggml.merges")).toEqual({ type: "array", itemType: "string" });
    expect(types.get("tokenizer.chat_template")).toEqual({ type: "string" });
  });

  it("describes a llama model with all its tensors in ggml dimension order", async () => {
    const path = join(folder, "tensors.gguf");
    await writeTestModel({ path });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    const { metadata } = info;
    expect(metadata.general.architecture).toBe("llama");
    const llama = info.architectureMetadata;
    expect(llama.context_length).toBe(2048);
    const n = llama.embedding_length!;
    const headCount = llama.attention!.head_count as number;
    const kvDimension = (n / headCount) * (llama.attention!.head_count_kv as number);
    const ff = llama.feed_forward_length as number;
    const vocabulary = getTestModelVocabulary().tokens.length;
    const dimensions = new Map(info.tensorInfo!.map((tensor) => [tensor.name, tensor.dimensions]));
    expect(dimensions.get("token_embd.weight")).toEqual([n, vocabulary]);
    expect(dimensions.get("output.weight")).toEqual([n, vocabulary]);
    expect(dimensions.get("output_norm.weight")).toEqual([n]);
    for (let block = 0; block < llama.block_count!; block++) {
      expect(dimensions.get(`blk.${block}.attn_norm.weight`)).toEqual([n]);
      expect(dimensions.get(`blk.${block}.attn_q.weight`)).toEqual([n, n]);
      expect(dimensions.get(`blk.${block}.attn_k.weight`)).toEqual([n, kvDimension]);
      expect(dimensions.get(`blk.${block}.attn_v.weight`)).toEqual([n, kvDimension]);
      expect(dimensions.get(`blk.${block}.attn_output.weight`)).toEqual([n, n]);
      expect(dimensions.get(`blk.${block}.ffn_norm.weight`)).toEqual([n]);
      expect(dimensions.get(`blk.${block}.ffn_gate.weight`)).toEqual([n, ff]);
      expect(dimensions.get(`blk.${block}.ffn_up.weight`)).toEqual([n, ff]);
      expect(dimensions.get(`blk.${block}.ffn_down.weight`)).toEqual([ff, n]);
    }
    expect(dimensions.size).toBe(3 + 9 * llama.block_count!);
  });

  it("has a byte-level BPE vocabulary with ChatML control tokens", async () => {
    const path = join(folder, "tokenizer.gguf");
    await writeTestModel({ path });
    const { tokenizer } = (await readGgufFileInfo(path, { logWarnings: false })).metadata;
    const ggml = tokenizer.ggml;
    expect(ggml.model).toBe("gpt2");
    expect(ggml.pre).toBe("qwen2");
    const tokens = ggml.tokens;
    const types = ggml.token_type as readonly number[];
    expect(types.length).toBe(tokens.length);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(tokens.slice(0, 256)).toEqual(byteCharacters);
    const idOf = (text: string): number => tokens.indexOf(text);
    for (const special of ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) {
      expect(types[idOf(special)], special).toBe(3);
    }
    expect(types.filter((type) => type === 3)).toHaveLength(3);
    expect(ggml.eos_token_id).toBe(idOf("<|im_end|>"));
    expect(ggml.eot_token_id).toBe(idOf("<|im_end|>"));
    expect(ggml.bos_token_id).toBe(idOf("<|endoftext|>"));
    // Every merge joins two existing tokens into another existing token.
    const merges = ggml.merges as readonly string[];
    expect(merges.length).toBeGreaterThan(200);
    for (const merge of merges) {
      const [left, right] = merge.split(" ");
      expect(
        tokens.includes(left!) && tokens.includes(right!) && tokens.includes(left! + right!),
        merge,
      ).toBe(true);
    }
    for (const piece of ["Ġthe", "Ġyou", '":', 'Ġ{"', "name"]) expect(tokens, piece).toContain(piece);
    expect(tokenizer.chat_template).toContain("<|im_start|>");
  });

  it("writes a small model of tens of millions of parameters, quantized to Q8_0", async () => {
    const path = join(folder, "small.gguf");
    const info = await writeTestModel({ path, size: "small" });
    expect(info.parameters).toBeGreaterThan(10_000_000);
    expect(info.contextLength).toBe(4096);
    expect(info.bytes).toBe((await stat(path)).size);
    expect(info.bytes).toBeLessThan(info.parameters * 1.2);
    const fileInfo = await readGgufFileInfo(path, { logWarnings: false });
    expect(fileInfo.architectureMetadata.context_length).toBe(4096);
    const types = new Map(fileInfo.tensorInfo!.map((tensor) => [tensor.name, tensor.ggmlType as number]));
    expect(types.get("blk.0.ffn_up.weight")).toBe(8);
    expect(types.get("token_embd.weight")).toBe(1);
    expect(types.get("output_norm.weight")).toBe(0);
  });

  it("writes the qwen2 variant under its own architecture keys", async () => {
    const path = join(folder, "qwen2.gguf");
    await writeTestModel({ path, architecture: "qwen2" });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    expect(info.metadata.general.architecture).toBe("qwen2");
    expect(info.architectureMetadata.attention?.head_count).toBe(2);
    await expect(checkModelFile(path)).resolves.toBeUndefined();
  });

  it("refuses an unknown size and a non-integer seed", async () => {
    await expect(
      writeTestModel({ path: join(folder, "bad.gguf"), size: "huge" as unknown as "tiny" }),
    ).rejects.toThrow(/size/);
    await expect(writeTestModel({ path: join(folder, "bad.gguf"), seed: 1.5 })).rejects.toThrow(/seed/);
  });
});

describe("byte-level BPE helpers", () => {
  it("maps bytes to GPT-2's printable characters and back", () => {
    expect(toByteLevel(" the")).toBe("Ġthe");
    expect(toByteLevel("a\nb")).toBe("aĊb");
    const text = 'héllo ✓ {"a": 1}\t';
    expect(Buffer.from(fromByteLevel(toByteLevel(text))).toString("utf8")).toBe(text);
  });

  it("pre-tokenizes like llama.cpp's qwen2 pre-tokenizer", () => {
    expect(preTokenize('Hello world, it\'s 2024!\n\n{"a": 1}')).toEqual([
      "Hello",
      " world",
      ",",
      " it",
      "'s",
      " ",
      "2",
      "0",
      "2",
      "4",
      "!\n\n",
      '{"',
      "a",
      '":',
      " ",
      "1",
      "}",
    ]);
  });
});
