import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkModelFile } from "../../src/gguf/check-model-file.ts";
import { gguf } from "../../src/gguf/gguf-value.ts";
import { writeGgufFile } from "../../src/gguf/gguf-writer.ts";
import { createTestModelContent, writeTestModel } from "../../src/gguf/write-test-model.ts";

let folder: string;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-check-model-"));
});

afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

/** Writes the tiny test model with one metadata key removed or replaced. */
async function writeAlteredModel(name: string, key: string, replacement?: ReturnType<typeof gguf.u32>) {
  const content = createTestModelContent({});
  const metadata = Object.fromEntries(
    Object.entries(content.metadata).flatMap(([entryKey, value]) =>
      entryKey !== key ? [[entryKey, value]] : replacement === undefined ? [] : [[entryKey, replacement]],
    ),
  );
  const path = join(folder, name);
  await writeGgufFile({ path, metadata, tensors: content.tensors });
  return path;
}

describe("checkModelFile", () => {
  it("accepts a complete test model", async () => {
    const path = join(folder, "complete.gguf");
    await writeTestModel({ path });
    await expect(checkModelFile(path)).resolves.toBeUndefined();
  });

  it.each([
    "llama.attention.head_count",
    "llama.feed_forward_length",
    "llama.block_count",
    "llama.embedding_length",
    "llama.context_length",
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
  ])("rejects a llama model without %s, naming the key", async (key) => {
    const path = await writeAlteredModel(`without-${key}.gguf`, key);
    await expect(checkModelFile(path)).rejects.toThrow(new RegExp(`${key.replaceAll(".", "\\.")}.*missing`));
  });

  it("rejects a head count of zero", async () => {
    const path = await writeAlteredModel("zero-heads.gguf", "llama.attention.head_count", gguf.u32(0));
    await expect(checkModelFile(path)).rejects.toThrow(
      /llama\.attention\.head_count must be a positive integer/,
    );
  });

  it("rejects a file that is not GGUF", async () => {
    const path = join(folder, "not-a-model.gguf");
    await writeFile(path, "this is plain text, not a model\n");
    await expect(checkModelFile(path)).rejects.toThrow(/not a GGUF file/);
  });

  it("rejects an empty file and a GGUF file cut short", async () => {
    const empty = join(folder, "empty.gguf");
    await writeFile(empty, "");
    await expect(checkModelFile(empty)).rejects.toThrow(/not a GGUF file/);
    const truncated = join(folder, "truncated.gguf");
    await writeFile(truncated, Buffer.from("GGUF\u0003\u0000\u0000\u0000", "latin1"));
    await expect(checkModelFile(truncated)).rejects.toThrow(/too short to be a GGUF file/);
  });

  it("rejects a header whose tensor or metadata count no file of its size can hold, at once", async () => {
    const path = join(folder, "complete-for-counts.gguf");
    await writeTestModel({ path });
    const original = await readFile(path);
    for (const offset of [8, 16]) {
      const damaged = Buffer.from(original);
      damaged.writeUInt32LE(0xffffffff, offset);
      const damagedPath = join(folder, `damaged-count-${offset}.gguf`);
      await writeFile(damagedPath, damaged);
      // node-llama-cpp's reader would build 4 billion entries first (minutes, gigabytes).
      await expect(checkModelFile(damagedPath)).rejects.toThrow(
        /more than a file of \d+ bytes can hold; the file is damaged/,
      );
    }
  });

  it("rejects a missing file with a clear message", async () => {
    await expect(checkModelFile(join(folder, "absent.gguf"))).rejects.toThrow(/cannot open the model file/);
  });

  // Why the check exists: llama.cpp asserts instead of throwing, which kills the whole process.
  it("guards against a real crash: llama.cpp aborts loading a model without head_count", async () => {
    const path = await writeAlteredModel("abort.gguf", "llama.attention.head_count");
    // A script file, not --eval: node-llama-cpp re-runs process.execArgv to test its binary.
    const script = join(folder, "load-model.mjs");
    await writeFile(
      script,
      `import { getLlama, LlamaLogLevel } from ${JSON.stringify(import.meta.resolve("node-llama-cpp"))};
      const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.disabled });
      await llama.loadModel({ modelPath: process.argv[2] }).catch(() => process.exit(3));
      process.exit(0);`,
    );
    const child = spawnSync(process.execPath, [script, path], { encoding: "utf8", timeout: 60_000 });
    expect(child.signal, child.stderr).toBe("SIGABRT");
  });
});
