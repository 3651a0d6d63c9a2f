import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../src/catalog/config-error.ts";
import { loadConfig } from "../../src/catalog/load-config.ts";
import { type ConfigTestFolder, createConfigTestFolder } from "./config-test-folder.ts";

let folder: ConfigTestFolder;

beforeEach(async () => {
  folder = await createConfigTestFolder();
});

afterEach(async () => {
  await folder.remove();
});

function upstreamModel(tuning: string): string {
  return `models:
  - id: hosted
    pricing: { input_per_million: "0.15", output_per_million: "0.60" }
    engine:
      type: openai
      endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ]
${tuning}`;
}

describe("upstream engine tuning keys", () => {
  it("reads the timeouts, retries, cooldown and connection limit", async () => {
    const file = await folder.write(
      "tollgate.yaml",
      upstreamModel(`      connect_timeout_ms: 1500
      first_byte_timeout_ms: 20000
      idle_timeout_ms: 30000
      max_retries: 0
      cooldown_ms: 2000
      max_connections: 32
`),
    );
    const config = await loadConfig({ file, env: {}, cwd: folder.path });
    expect(config.models[0]?.engine).toEqual({
      type: "openai",
      endpoints: [{ baseUrl: "http://127.0.0.1:9/v1", apiKey: undefined }],
      model: "hosted",
      fallbacks: [],
      connectTimeoutMs: 1500,
      firstByteTimeoutMs: 20000,
      idleTimeoutMs: 30000,
      maxRetries: 0,
      cooldownMs: 2000,
      maxConnections: 32,
    });
  });

  it("names the field and the range of a bad value", async () => {
    const file = await folder.write(
      "tollgate.yaml",
      upstreamModel("      max_retries: 99\n      connect_timeout_ms: -1\n"),
    );
    const error = await loadConfig({ file, env: {}, cwd: folder.path }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ConfigError);
    const fields = (error as ConfigError).problems.map((problem) => problem.field);
    expect(fields).toEqual(
      expect.arrayContaining(["models[0].engine.max_retries", "models[0].engine.connect_timeout_ms"]),
    );
  });
});
