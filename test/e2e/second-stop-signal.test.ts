/**
 * A second SIGTERM or SIGINT on a real `tollgate serve` process that is draining: it exits at
 * once with code 1, where the second signal used to be ignored and the drain ran to its end.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { serveEnvironment } from "../support/serve-process.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-second-signal-"));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe("a second stop signal while tollgate serve drains", () => {
  it.each(["SIGTERM", "SIGINT"])("%s twice: exits at once with code 1", async (signal) => {
    // An upstream that never answers: the request would hold the drain for its whole grace.
    const upstream = await startMockUpstream(() => new Promise<void>(() => {}));
    const workdir = mkdtempSync(join(folder, `${signal}-`));
    const configFile = join(workdir, "tollgate.yaml");
    writeFileSync(
      configFile,
      `server: { host: 127.0.0.1, port: 0 }
database: sqlite:./tollgate.db
models:
  - id: silent
    kind: chat
    pricing: { input_per_million: "1", output_per_million: "1" }
    engine: { type: openai, endpoints: [ { base_url: "${upstream.baseUrl}" } ] }
`,
    );
    const env = serveEnvironment();
    const child = spawn(process.execPath, [cli, "serve", "--config", configFile], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
      cwd: workdir,
    });
    let output = "";
    child.stdout.on("data", (data: Buffer) => {
      output += data.toString();
    });
    child.stderr.on("data", (data: Buffer) => {
      output += data.toString();
    });
    const exited = once(child, "exit") as Promise<[number | null, string | null]>;
    try {
      while (!/listening on (\S+)/.test(output)) {
        if (child.exitCode !== null) throw new Error(output);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const baseUrl = /listening on (\S+)/.exec(output)![1];
      const starterKey = /starter key: (\S+)/.exec(output)![1];
      const pending = fetch(`${baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${starterKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "silent", messages: [{ role: "user", content: "Hi" }] }),
      }).catch((error: unknown) => error);
      while (upstream.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      child.kill(signal as NodeJS.Signals);
      while (!output.includes('"msg":"shutting down"'))
        await new Promise((resolve) => setTimeout(resolve, 20));
      child.kill(signal as NodeJS.Signals);
      const [code, killedBy] = await exited;
      expect({ code, killedBy }, output).toEqual({ code: 1, killedBy: null });
      expect(output).toContain("second stop signal: exiting now");
      await pending;
    } finally {
      child.kill("SIGKILL");
      await upstream.close();
    }
  });
});
