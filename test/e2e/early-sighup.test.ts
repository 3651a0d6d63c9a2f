/**
 * A SIGHUP that comes while `tollgate serve` is still loading its code, before serve-command.ts
 * has put its handler in, is noted by bin/tollgate.js and done once the server has started (it
 * ended the process, SIGHUP's default action, for the first second or so of every start).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const bin = join(import.meta.dirname, "../../bin/tollgate.js");

/** Loaded before bin/tollgate.js: sends the process a SIGHUP as src/cli.ts is about to load. */
const SIGHUP_BEFORE_THE_CLI = `
import { registerHooks } from "node:module";
let sent = false;
registerHooks({
  resolve(specifier, context, next) {
    if (!sent && specifier.endsWith("src/cli.ts")) {
      sent = true;
      process.kill(process.pid, "SIGHUP");
    }
    return next(specifier, context);
  },
});
`;

let folder: string;

beforeAll(() => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-early-sighup-"));
  writeFileSync(join(folder, "sighup-before-the-cli.mjs"), SIGHUP_BEFORE_THE_CLI);
  writeFileSync(
    join(folder, "tollgate.yaml"),
    'server: { port: 0 }\ndatabase: "sqlite::memory:"\nmodels: []\n',
  );
});

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

describe("a SIGHUP before serve has loaded its code", () => {
  it("is done once the server has started, instead of ending the process", async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const variable of ["TOLLGATE_CONFIG", "TOLLGATE_ADMIN_KEY", "PORT", "HOST"]) delete env[variable];
    const child = spawn(
      process.execPath,
      ["--import", join(folder, "sighup-before-the-cli.mjs"), bin, "serve", "--config", "tollgate.yaml"],
      { cwd: folder, stdio: ["ignore", "pipe", "pipe"], env },
    );
    let output = "";
    const reloaded = new Promise<void>((resolve, reject) => {
      const read = (data: Buffer) => {
        output += data.toString();
        if (output.includes('"msg":"catalogue reloaded"')) resolve();
      };
      child.stdout.on("data", read);
      child.stderr.on("data", read);
      child.on("exit", (code, signal) => reject(new Error(`ended (${code ?? signal}):\n${output}`)));
    });
    try {
      await reloaded;
      expect(output).toMatch(/Tollgate listening on http:\/\/127\.0\.0\.1:\d+\/v1/);
      expect(output.indexOf("SIGHUP: reloading the config")).toBeGreaterThan(
        output.indexOf("Tollgate listening"),
      );
    } finally {
      child.kill("SIGKILL");
    }
  });
});
