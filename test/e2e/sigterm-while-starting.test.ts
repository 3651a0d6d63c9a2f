/**
 * SIGTERM and SIGINT on a real `tollgate serve` process while it starts (its store opened and
 * claimed, its port not open yet): kept and done once it has started, a clean shutdown with exit
 * code 0 (SPEC section 11), where the signal's default action used to end it with 143 at once.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-signal-while-starting-"));

afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** Loaded before the CLI: sends `signal` from inside the server's start, when it begins to listen. */
function preloadSending(signal: string): string {
  const file = join(folder, `${signal}.mjs`);
  writeFileSync(
    file,
    `import net from "node:net";
const listen = net.Server.prototype.listen;
let sent = false;
net.Server.prototype.listen = function (...args) {
  if (!sent) {
    sent = true;
    process.kill(process.pid, ${JSON.stringify(signal)});
  }
  return listen.apply(this, args);
};
`,
  );
  return file;
}

describe("a stop signal while tollgate serve starts", () => {
  it.each(["SIGTERM", "SIGINT"])(
    "%s: starts, shuts down cleanly, exits 0, releases its store",
    async (signal) => {
      const workdir = mkdtempSync(join(folder, `${signal}-`));
      const configFile = join(workdir, "tollgate.yaml");
      writeFileSync(
        configFile,
        "server: { host: 127.0.0.1, port: 0 }\ndatabase: sqlite:./tollgate.db\nmodels: []\n",
      );
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const variable of [
        "TOLLGATE_CONFIG",
        "TOLLGATE_DATABASE_URL",
        "TOLLGATE_ADMIN_KEY",
        "PORT",
        "HOST",
      ])
        delete env[variable];
      const child = spawn(
        process.execPath,
        ["--import", preloadSending(signal), cli, "serve", "--config", configFile],
        { stdio: ["ignore", "pipe", "pipe"], env, cwd: workdir },
      );
      let output = "";
      child.stdout.on("data", (data: Buffer) => {
        output += data.toString();
      });
      child.stderr.on("data", (data: Buffer) => {
        output += data.toString();
      });
      const [code, killedBy] = await new Promise<[number | null, string | null]>((resolve) =>
        child.on("exit", (exitCode, exitSignal) => resolve([exitCode, exitSignal])),
      );
      expect({ code, killedBy }, output).toEqual({ code: 0, killedBy: null });
      // The first start's keys are printed all the same: they are shown only this once.
      expect(output).toContain("starter key: sk-tg-");
      expect(output).toContain('"msg":"shutting down"');
      // The claim on the database file is released: the next start needs no recovery.
      expect(existsSync(join(workdir, "tollgate.db"))).toBe(true);
      expect(readdirSync(workdir).filter((name) => name.includes(".server"))).toEqual([]);
    },
  );
});
