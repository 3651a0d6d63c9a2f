/**
 * A `tollgate serve` that cannot listen says why with the fix, ends at once (a model download
 * under way does not hold it), and leaves the first-start keys to the start that succeeds.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ModelFileServer, startModelFileServer } from "../models/model-file-server.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");

let folder: string;
let configFile: string;
let files: ModelFileServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-start-failure-"));
  files = await startModelFileServer();
  // The model's download never gets its body: a server that waited for it would never end.
  files.files.set("/tiny.gguf", { bytes: Buffer.alloc(1024), gate: new Promise(() => {}) });
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(
    configFile,
    [
      "database: sqlite:./tollgate.db",
      "models:",
      "  - id: tiny",
      "    kind: chat",
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      `    engine: { type: llama, model: "${files.baseUrl}/tiny.gguf", parallel: 1, threads: 1, gpu: false }`,
      "",
    ].join("\n"),
  );
});

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await files?.close();
  rmSync(folder, { recursive: true, force: true });
});

function serve(port: number, host?: string) {
  const hostArguments = host === undefined ? [] : ["--host", host];
  const child = spawn(
    process.execPath,
    [cli, "serve", "--port", String(port), ...hostArguments, "--config", configFile],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, TOLLGATE_MODELS_DIR: join(folder, "models") },
    },
  );
  children.push(child);
  let output = "";
  child.stdout?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  child.stderr?.on("data", (data: Buffer) => {
    output += data.toString();
  });
  return { child, output: () => output };
}

async function occupiedPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return { server, port: address.port };
}

describe("a server that cannot listen", () => {
  it("ends with the reason and the fix, and the next start still shows the first-start keys", async () => {
    const { server, port } = await occupiedPort();
    const failed = serve(port);
    const code = await Promise.race([
      new Promise<number | null>((resolve) => failed.child.on("exit", resolve)),
      sleep(20_000).then(() => "still running" as const),
    ]);
    expect(code, failed.output()).toBe(1);
    expect(failed.output()).toContain(
      `tollgate: Another program already listens on 127.0.0.1:${port}. Stop it, or choose another port with --port, PORT or server.port.`,
    );
    expect(failed.output()).not.toContain("First start");

    await new Promise((resolve) => server.close(resolve));
    const started = serve(port);
    for (let waited = 0; waited < 20_000 && !started.output().includes("Tollgate listening"); waited += 50) {
      if (started.child.exitCode !== null) break;
      await sleep(50);
    }
    expect(started.output()).toContain("Tollgate listening");
    expect(started.output()).toContain("First start: created these keys.");
    expect(started.output()).toMatch(/admin key: {3}sk-tg-/);
    started.child.kill("SIGKILL");
  }, 60_000);

  it("names a host name that does not resolve, with the fix (regression: a bare getaddrinfo ENOTFOUND)", async () => {
    const failed = serve(0, "no-such-host.invalid");
    const code = await Promise.race([
      new Promise<number | null>((resolve) => failed.child.on("exit", resolve)),
      sleep(20_000).then(() => "still running" as const),
    ]);
    expect(code, failed.output()).toBe(1);
    expect(failed.output()).toMatch(
      /tollgate: The host name no-such-host\.invalid to listen on does not resolve.*Use an address such as 127\.0\.0\.1 or 0\.0\.0\.0/,
    );
  }, 30_000);
});
