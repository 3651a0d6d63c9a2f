import { existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";

const folder = join(tmpdir(), "tollgate-test-models");

/**
 * The path of a tiny generated test model, written once per machine and seed (the generator is
 * deterministic and writes atomically, so concurrent test processes can share the file).
 */
export async function getTestModelPath(
  options: { seed?: number; size?: "tiny" | "small"; endless?: boolean } = {},
): Promise<string> {
  const seed = options.seed ?? 1;
  const size = options.size ?? "tiny";
  mkdirSync(folder, { recursive: true });
  const path = join(folder, `${size}-seed${seed}${options.endless ? "-endless" : ""}.gguf`);
  // An "endless" model has no bias towards its end token: it generates until a limit.
  if (!existsSync(path))
    await writeTestModel({ path, seed, size, ...(options.endless ? { endBias: 0 } : {}) });
  return path;
}
