import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // llama.cpp inference is CPU-bound on a 2-core machine: run test files one after another.
    fileParallelism: false,
    pool: "forks",
  },
});
