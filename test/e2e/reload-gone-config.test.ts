/**
 * SIGHUP on a real `tollgate serve` process that reads the working folder's `tollgate.yaml` (no
 * `--config`, as `npm start` runs it), at a moment the file is gone. An editor that saves by
 * renaming (vim moves the file aside, then writes the new one) had the reload swap the built-in
 * catalogue in for the configured one at once, logged as any reload: every configured model
 * answered 404 and the built-in model's download began. Now the reload looks again for a second,
 * and a file that stays gone is said at warning level.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { killServeProcesses, type ServeProcess, startServeProcess } from "../support/serve-process.ts";

const folder = mkdtempSync(join(tmpdir(), "tollgate-reload-gone-"));
const configFile = join(folder, "tollgate.yaml");
const asideFile = join(folder, "tollgate.yaml~");
let server: ServeProcess;
let baseUrl: string;
let starterKey: string;

beforeAll(async () => {
  writeFileSync(
    configFile,
    [
      "server: { host: 127.0.0.1, port: 0 }",
      "database: sqlite:./tollgate.db",
      "models:",
      "  - id: alpha",
      "    kind: chat",
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      '    engine: { type: openai, endpoints: [ { base_url: "http://127.0.0.1:9/v1" } ], model: m }',
      "",
    ].join("\n"),
  );
  // The built-in model's download, once the built-in catalogue is served, goes nowhere.
  server = await startServeProcess(undefined, {
    cwd: folder,
    env: { TOLLGATE_HF_ENDPOINT: "http://127.0.0.1:9" },
  });
  baseUrl = /listening on (http:\/\/\S+\/v1)/.exec(server.output())?.[1] ?? "";
  starterKey = /starter key: (sk-tg-\S+)/.exec(server.output())?.[1] ?? "";
});

afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

function logLines(): Record<string, unknown>[] {
  return server
    .output()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function waitForReloads(count: number): Promise<void> {
  for (const end = Date.now() + 10_000; Date.now() < end; await sleep(50)) {
    if (logLines().filter((line) => line.msg === "catalogue reloaded").length >= count) return;
  }
  throw new Error(`no reload ${count} within 10 s:\n${server.output()}`);
}

async function modelIds(): Promise<string[]> {
  const response = await fetch(`${baseUrl}/models`, { headers: { authorization: `Bearer ${starterKey}` } });
  return ((await response.json()) as { data: { id: string }[] }).data.map((model) => model.id);
}

describe("a reload when the working folder's tollgate.yaml is gone", () => {
  it("waits for a file an editor is saving by renaming, and serves its models", async () => {
    expect(await modelIds()).toEqual(["alpha"]);
    renameSync(configFile, asideFile);
    server.child.kill("SIGHUP");
    await sleep(150);
    renameSync(asideFile, configFile);
    await waitForReloads(1);
    expect(await modelIds()).toEqual(["alpha"]);
    expect(logLines().filter((line) => String(line.msg).includes("is gone"))).toEqual([]);
  });

  it("serves the built-in catalogue when the file stays gone, saying so as a warning", async () => {
    renameSync(configFile, asideFile);
    server.child.kill("SIGHUP");
    await waitForReloads(2);
    expect(await modelIds()).not.toContain("alpha");
    const gone = logLines().filter((line) => String(line.msg).includes("is gone"));
    expect(gone).toHaveLength(1);
    expect(gone[0]).toMatchObject({ level: 40 });
    // Put back, the file's models are served again.
    renameSync(asideFile, configFile);
    server.child.kill("SIGHUP");
    await waitForReloads(3);
    expect(await modelIds()).toEqual(["alpha"]);
  });
});
