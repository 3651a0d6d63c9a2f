import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/open-store.ts";
import { findFreePort } from "../support/free-port.ts";
import { killServeProcesses, startServeProcess } from "../support/serve-process.ts";
import { getTestModelPath } from "../support/test-model.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
let folder: string;
let configFile: string;
let port: number;

function runCli(...args: string[]) {
  return spawnSync(process.execPath, [cli, ...args, "--config", configFile], { encoding: "utf8" });
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-crash-"));
  port = await findFreePort();
  const model = await getTestModelPath({ endless: true, size: "small" });
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(
    configFile,
    [
      `server: { host: 127.0.0.1, port: ${port} }`,
      "database: sqlite:./tollgate.db",
      "models:",
      "  - id: endless",
      "    kind: chat",
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      "    context_length: 2048",
      `    engine: { type: llama, model: "${model}", parallel: 1, threads: 1, gpu: false }`,
      "",
    ].join("\n"),
  );
});

afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

describe("a crash mid-stream", () => {
  it("leaves a reservation that the next start releases, and then audit passes", async () => {
    expect(runCli("accounts", "create", "crash", "--balance", "5").status).toBe(0);
    // The CLI checks a key's models against the config's catalogue.
    const typo = runCli("keys", "create", "--account", "crash", "--models", "endles");
    expect(typo.status).toBe(1);
    expect(typo.stderr).toContain("No model 'endles' in the catalogue. Did you mean 'endless'?");
    const created = runCli("keys", "create", "--account", "crash", "--models", "endless");
    expect(created.status).toBe(0);
    const key = created.stdout.split("\n").find((line) => line.startsWith("sk-tg-"))!;
    expect(key).toMatch(/^sk-tg-/);

    const first = await startServeProcess(configFile);
    const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "endless", messages: [{ role: "user", content: "Go" }], stream: true }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    await reader.read();
    // The server holds a reservation in memory for its first second, then writes it: wait for
    // the row (a crash before that loses nothing, as nothing was written or charged).
    const watcher = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
    try {
      const deadline = Date.now() + 20_000;
      while ((await watcher.listReservations()).length === 0) {
        if (Date.now() > deadline) throw new Error("the reservation was never written");
        if ((await reader.read()).done) throw new Error("the endless model ended");
      }
    } finally {
      await watcher.close();
    }
    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));

    const store = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
    try {
      expect(await store.listReservations()).toHaveLength(1);
      const before = runCli("audit");
      expect(before.status).toBe(1);
      expect(before.stdout + before.stderr).toMatch(/reservation/i);

      const second = await startServeProcess(configFile);
      second.child.kill("SIGTERM");
      const exitCode = await new Promise((resolve) => second.child.once("exit", resolve));
      expect(exitCode).toBe(0);
      expect(await store.listReservations()).toEqual([]);
      const account = await store.getAccountByName("crash");
      expect(await store.getAccountMoney(account!.id)).toMatchObject({ reservedNano: 0n, spentNano: 0n });
    } finally {
      await store.close();
    }
    const after = runCli("audit");
    expect(after.stdout + after.stderr).toMatch(/passed/i);
    expect(after.status).toBe(0);
  });
});
