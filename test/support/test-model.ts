import { existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";

const folder = join(tmpdir(), "tollgate-test-models");

/**
 * The path of a tiny generated test model, written once per machine and seed (the generator is
 * deterministic and writes atomically, so concurrent test processes can share the file).
 */
export async function getTestModelPath(options: { seed?: number; size?: "tiny" | "small" } = {}): Promise<string> {
  const seed = options.seed ?? 1;
  const size = options.size ?? "tiny";
  mkdirSync(folder, { recursive: true });
  const path = join(folder, `${size}-seed${seed}.gguf`);
  if (!existsSync(path)) await writeTestModel({ path, seed, size });
  return path;
}
