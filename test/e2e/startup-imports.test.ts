/**
 * A server loads the heavy optional packages only when its configuration needs them: `pg` for a
 * PostgreSQL database, `ioredis` for Redis, `undici` for an upstream model, `node-llama-cpp` for a
 * local model whose file is there. Idle memory depends on it (SPEC: well under 150 MB without a
 * local model), so it is checked on a real `tollgate serve` process.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOADED_PACKAGES_PREFIX } from "../support/record-packages.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const recorder = join(import.meta.dirname, "../support/record-packages.ts");
const OPTIONAL_PACKAGES = ["ioredis", "node-llama-cpp", "pg", "undici"];

let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-startup-"));
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

/**
 * Runs `tollgate serve` (SQLite, no Redis) with `models` (YAML lines under `models:`), waits until
 * `/ready` answers 200 (no model is loading any more), stops it with SIGTERM and answers the
 * optional packages it loaded.
 */
async function optionalPackagesLoaded(name: string, models: string[]): Promise<string[]> {
  const configFile = join(folder, `${name}.yaml`);
  writeFileSync(
    configFile,
    [
      "server: { host: 127.0.0.1, port: 0 }",
      `database: sqlite:${join(folder, `${name}.db`)}`,
      models.length === 0 ? "models: []" : "models:",
      ...models,
      "",
    ].join("\n"),
  );
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const variable of ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL", "PORT", "HOST"]) {
    delete env[variable];
  }
  const child = spawn(process.execPath, ["--import", recorder, cli, "serve", "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
  });
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    let ready = false;
    for (let attempt = 0; attempt < 400 && !ready; attempt++) {
      if (child.exitCode !== null) throw new Error(`server exited: ${output}`);
      const baseUrl = /listening on (http:\/\/\S+)\/v1/.exec(output)?.[1];
      if (baseUrl !== undefined) ready = (await fetch(`${baseUrl}/ready`)).status === 200;
      if (!ready) await sleep(50);
    }
    if (!ready) throw new Error(`server did not become ready: ${output}`);
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
  const line = output.split("\n").find((text) => text.startsWith(LOADED_PACKAGES_PREFIX));
  if (line === undefined) throw new Error(`no package list in the output: ${output}`);
  const loaded = JSON.parse(line.slice(LOADED_PACKAGES_PREFIX.length)) as string[];
  return OPTIONAL_PACKAGES.filter((name) => loaded.includes(name));
}

describe("packages a server loads at startup", () => {
  it("loads none of the optional ones without models, PostgreSQL or Redis", async () => {
    expect(await optionalPackagesLoaded("empty", [])).toEqual([]);
  });

  it("does not load node-llama-cpp for a local model whose file is missing", async () => {
    const models = [
      "  - id: missing",
      "    kind: chat",
      '    pricing: { input_per_million: "0.10", output_per_million: "0.40" }',
      `    engine: { type: llama, model: ${join(folder, "missing.gguf")}, gpu: false }`,
    ];
    expect(await optionalPackagesLoaded("missing-model", models)).toEqual([]);
  });

  it("loads undici, and only it, for an upstream model", async () => {
    const models = [
      "  - id: upstream",
      "    kind: chat",
      '    pricing: { input_per_million: "0.10", output_per_million: "0.40" }',
      '    engine: { type: openai, model: gpt-test, endpoints: [{ base_url: "http://127.0.0.1:9/v1" }] }',
    ];
    expect(await optionalPackagesLoaded("upstream", models)).toEqual(["undici"]);
  });
});
