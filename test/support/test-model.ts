import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";

const folder = join(tmpdir(), "tollgate-test-models");
const generatorFolder = join(import.meta.dirname, "../../src/gguf");

/** Changes whenever the generator's code does, so a cached model is never a stale one. */
const generatorVersion = createHash("sha256")
  .update(
    readdirSync(generatorFolder)
      .sort()
      .map((name) => readFileSync(join(generatorFolder, name), "utf8"))
      .join("\0"),
  )
  .digest("hex")
  .slice(0, 12);

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
  const path = join(
    folder,
    `${size}-seed${seed}${options.endless ? "-endless" : ""}-${generatorVersion}.gguf`,
  );
  // An "endless" model has no bias towards its end token: it generates until a limit.
  if (!existsSync(path))
    await writeTestModel({ path, seed, size, ...(options.endless ? { endBias: 0 } : {}) });
  return path;
}
