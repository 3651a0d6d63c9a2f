import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // llama.cpp inference is CPU-bound on a 2-core machine: run test files one after another.
    fileParallelism: false,
    pool: "forks",
    env: {
      // Never the machine's own models folder (~/.cache/tollgate/models): a model pulled there by
      // hand (`hf:org/repo:Q4_K_M`) was found by a test that expects it not to be downloaded.
      // Tests that download name a folder of their own.
      TOLLGATE_MODELS_DIR: join(tmpdir(), `tollgate-test-models-${process.pid}`),
    },
  },
});
