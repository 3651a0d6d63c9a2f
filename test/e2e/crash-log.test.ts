/**
 * An uncaught exception, or a promise rejection no one handled, in a real `tollgate serve`
 * process: one JSON line at level fatal on stdout (the error through the logs' serializer), a
 * bounded stop of the server, and exit code 1, where Node used to print its plain-text stack on
 * stderr and exit at once. The fault comes from a module loaded before the CLI (`--import`):
 * nothing in Tollgate throws on purpose.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { serveEnvironment, writeServeConfig } from "../support/serve-process.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-crash-log-"));
/**
 * The servers started here: a test that times out never reaches the `finally` that kills its
 * server (the await it is stuck on never settles), and a server that hangs would outlive the run.
 */
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(folder, { recursive: true, force: true });
});

/** A password as ioredis puts it on the error of a refused AUTH: it must not reach the log. */
const SECRET = "hunter2-redis-password";

/** The length of the large field of the error thrown while starting. */
const PADDING = 300_000;

/**
 * Loaded before the CLI: on SIGUSR2, an error thrown from an event listener (an uncaught
 * exception), or a rejected promise no one handles; or, with `whileStarting`, an uncaught
 * exception as the server begins to listen, which then never listens: the crash comes before
 * `tollgate serve` has its server, whose start it ends.
 */
function preload(
  fault: "throw" | "reject" | "whileStarting",
  paddingLength = fault === "whileStarting" ? PADDING : 0,
): string {
  const file = join(folder, `${fault}-${paddingLength}.mjs`);
  // While starting, the error also carries a field larger than a pipe takes at once (64 KiB):
  // its line is written in parts, and the process waits for the last before it exits.
  const padding = paddingLength > 0 ? `, padding: "x".repeat(${paddingLength})` : "";
  const error = `Object.assign(new Error("boom: ${fault}"), { command: { name: "auth", args: ["default", "${SECRET}"] }${padding} })`;
  writeFileSync(
    file,
    fault === "whileStarting"
      ? `import net from "node:net";
net.Server.prototype.listen = function () {
  setImmediate(() => { throw ${error}; });
  return this;
};
`
      : `process.on("SIGUSR2", () => {
  ${fault === "throw" ? `throw ${error};` : `Promise.reject(${error});`}
});
`,
  );
  return file;
}

interface LogLine {
  level: number;
  msg: string;
  origin?: string;
  err?: { type?: string; message?: string; stack?: string; command?: { name?: string }; padding?: string };
}

/** Runs `tollgate serve` with `fault` loaded; answers its exit, its stdout's JSON lines, its stderr. */
async function serveAndCrash(fault: "throw" | "reject" | "whileStarting") {
  const workdir = mkdtempSync(join(folder, `${fault}-`));
  const configFile = writeServeConfig(workdir);
  const env = serveEnvironment();
  const child = spawn(process.execPath, ["--import", preload(fault), cli, "serve", "--config", configFile], {
    stdio: ["ignore", "pipe", "pipe"],
    env,
    cwd: workdir,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (data: Buffer) => {
    stdout += data.toString();
  });
  child.stderr.on("data", (data: Buffer) => {
    stderr += data.toString();
  });
  children.add(child);
  const exited = once(child, "exit") as Promise<[number | null, string | null]>;
  try {
    if (fault !== "whileStarting") {
      while (!stdout.includes("listening on")) {
        if (child.exitCode !== null) throw new Error(stdout + stderr);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      child.kill("SIGUSR2");
    }
    const [code, killedBy] = await exited;
    const lines = stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as LogLine);
    return { code, killedBy, stdout, stderr, lines, workdir };
  } finally {
    child.kill("SIGKILL");
  }
}

describe("a crash of tollgate serve", () => {
  it.each([
    { fault: "throw", origin: "uncaughtException", msg: "uncaught exception; stopping the server" },
    {
      fault: "reject",
      origin: "unhandledRejection",
      msg: "unhandled promise rejection; stopping the server",
    },
  ] as const)(
    "$origin: one fatal JSON line, the server stopped, exit code 1",
    async ({ fault, origin, msg }) => {
      const { code, killedBy, stdout, stderr, lines, workdir } = await serveAndCrash(fault);
      expect({ code, killedBy }, stdout + stderr).toEqual({ code: 1, killedBy: null });
      // Nothing on stderr: no plain-text stack beside the JSON lines.
      expect(stderr).toBe("");
      const fatal = lines.filter((line) => line.level === 60);
      expect(fatal, stdout).toEqual([
        expect.objectContaining({
          msg,
          origin,
          err: expect.objectContaining({
            type: "Error",
            message: `boom: ${fault}`,
            command: { name: "auth" },
          }),
        }),
      ]);
      expect(fatal[0]?.err?.stack).toContain(`Error: boom: ${fault}`);
      expect(stdout).not.toContain(SECRET);
      // Stopped before the exit: the drain ended, and the store's claim on its file is released.
      expect(lines.at(-1), stdout).toMatchObject({ msg: "shut down", graceMs: 0 });
      expect(readdirSync(workdir).filter((name) => name.includes(".server"))).toEqual([]);
    },
  );

  it("while it starts: the fatal JSON line all the same, written whole, exit code 1", async () => {
    const { code, killedBy, stdout, stderr, lines } = await serveAndCrash("whileStarting");
    expect({ code, killedBy }, stdout + stderr).toEqual({ code: 1, killedBy: null });
    expect(stderr).toBe("");
    expect(
      lines.filter((line) => line.level === 60),
      stdout,
    ).toEqual([
      expect.objectContaining({
        msg: "uncaught exception; stopping the server",
        origin: "uncaughtException",
        err: expect.objectContaining({ message: "boom: whileStarting", command: { name: "auth" } }),
      }),
    ]);
    expect(stdout).not.toContain(SECRET);
    expect(lines.find((line) => line.level === 60)?.err?.padding).toHaveLength(PADDING);
    // The server's logger had lines of its own still to write (its new store): the crash's line
    // goes through it, after them. Regression: the crash took a logger of its own on the same
    // stdout, and a line of the server's cut the crash's in two (neither parsed as JSON).
    expect(lines.map((line) => line.msg).slice(0, 2)).toEqual([
      "creating the store's tables",
      "the store is created",
    ]);
  });
});

describe("a crash of tollgate serve whose log reader takes nothing more (a full pipe)", () => {
  it("exits all the same, with code 1, once the wait for the log is over", async () => {
    const workdir = mkdtempSync(join(folder, "unread-"));
    const configFile = writeServeConfig(workdir);
    const env = serveEnvironment();
    const child = spawn(
      process.execPath,
      ["--import", preload("throw", 300_000), cli, "serve", "--config", configFile],
      {
        stdio: ["ignore", "pipe", "ignore"],
        env,
        cwd: workdir,
      },
    );
    children.add(child);
    try {
      // Read until it serves, then no more: the crash's line (larger than the pipe holds) and
      // what follows it never get out.
      let stdout = "";
      const read = (data: Buffer) => {
        stdout += data.toString();
      };
      child.stdout.on("data", read);
      while (!stdout.includes("listening on")) {
        if (child.exitCode !== null) throw new Error(stdout);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      child.stdout.off("data", read);
      child.stdout.pause();
      const exited = once(child, "exit") as Promise<[number | null]>;
      child.kill("SIGUSR2");
      // It hung here for ever: pino's exit hook retried its write to the full pipe.
      const [code] = await exited;
      expect(code).toBe(1);
    } finally {
      child.kill("SIGKILL");
    }
  });
});
