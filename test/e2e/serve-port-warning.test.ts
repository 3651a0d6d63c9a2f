/**
 * `serve --port` (and `--host`) win over the PORT (HOST) variable and the config file alike: the
 * warning that the variable replaced the file's value is for a server that listens where the
 * variable says. Regression: `PORT=A serve --port B` listened on B and warned "PORT replaces
 * server.port".
 */
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../support/free-port.ts";
import { killServeProcesses, startServeProcess, writeServeConfig } from "../support/serve-process.ts";

let folder: string;
let configFile: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-serve-port-"));
  configFile = writeServeConfig(folder);
});

afterAll(() => {
  killServeProcesses();
  rmSync(folder, { recursive: true, force: true });
});

/** What `serve` printed by the time it listened, and a moment after (the warnings follow the banner). */
async function startAndStop(options: { env: NodeJS.ProcessEnv; args?: string[] }): Promise<string> {
  const served = await startServeProcess(configFile, { cwd: folder, ...options });
  await sleep(300);
  served.child.kill("SIGTERM");
  await once(served.child, "exit");
  return served.output();
}

describe("serve's port", () => {
  it("is the variable's, which says it replaced the file's", async () => {
    const port = await findFreePort();
    const output = await startAndStop({ env: { PORT: String(port) } });
    expect(output).toContain(`listening on http://127.0.0.1:${port}`);
    expect(output).toContain("PORT replaces server.port in the config file (the environment wins)");
  });

  it("is --port's, over the variable, which then replaced nothing and says nothing", async () => {
    const [variable, flag] = [await findFreePort(), await findFreePort()];
    const output = await startAndStop({ env: { PORT: String(variable) }, args: ["--port", String(flag)] });
    expect(output).toContain(`listening on http://127.0.0.1:${flag}`);
    expect(output).not.toContain("PORT replaces server.port");
  });

  it("is --port's where the file's names a variable that is not set (regression: the start stopped on it), and so after a reload", async () => {
    const file = join(folder, "port-variable.yaml");
    writeFileSync(
      file,
      `server: { host: "\${UNSET_HOST}", port: "\${UNSET_PORT}" }\ndatabase: sqlite:./tollgate.db\nmodels: []\n`,
    );
    const flag = await findFreePort();
    const served = await startServeProcess(file, {
      cwd: folder,
      args: ["--host", "127.0.0.1", "--port", String(flag)],
    });
    try {
      expect(served.output()).toContain(`listening on http://127.0.0.1:${flag}`);
      served.child.kill("SIGHUP");
      for (let wait = 0; wait < 100 && !served.output().includes("catalogue reloaded"); wait++)
        await sleep(50);
      expect(served.output()).toContain("catalogue reloaded");
      expect(served.output()).not.toContain("is not set");
    } finally {
      served.child.kill("SIGTERM");
      await once(served.child, "exit");
    }
  });
});
