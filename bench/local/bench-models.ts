import { join } from "node:path";
import { type TestModelSize, writeTestModel } from "../../src/gguf/write-test-model.ts";

/** A generated benchmark model: its file and how it was made. */
export interface BenchModel {
  path: string;
  size: TestModelSize;
  seed: number;
  /** 0: plain random logits, so a generation runs to its token limit. */
  endBias: number;
  parameters: number;
}

/**
 * Writes a test model into `folder` (a benchmark's own temporary folder, so a run never measures a
 * file left by an older generator). With `endBias: 0` the model practically never ends by itself,
 * so a request with `max_tokens: N` generates exactly N tokens.
 */
export async function writeBenchModel(options: {
  folder: string;
  size: TestModelSize;
  seed?: number;
  endBias?: number;
}): Promise<BenchModel> {
  const seed = options.seed ?? 7;
  const endBias = options.endBias ?? 0;
  const path = join(options.folder, `${options.size}-seed${seed}-end${endBias}.gguf`);
  const info = await writeTestModel({ path, seed, size: options.size, endBias });
  return { path, size: options.size, seed, endBias, parameters: info.parameters };
}
