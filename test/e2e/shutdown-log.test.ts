/**
 * The line that ends a shutdown's drain ("shut down"): how long it took, how many requests were
 * running when it began and how many it had to cut at the grace deadline. `shutting down` said
 * that a drain began, and nothing said that it ended. Read on a real `tollgate serve` process
 * (the line is out before the process exits) and on a real server with requests held.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import { type MockHandler, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { serveEnvironment, writeServeConfig } from "../support/serve-process.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const cli = join(import.meta.dirname, "../../src/cli.ts");
const folder = mkdtempSync(join(tmpdir(), "tollgate-shutdown-log-"));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface LogLine {
  level: number;
  msg: string;
  ms?: number;
  graceMs?: number;
  requestsRunning?: number;
  requestsCut?: number;
  unrecordedCharges?: number;
}

function parseLines(text: string): LogLine[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine);
}

/**
 * A server in this process on a SQLite file of its own (in a new folder named after `prefix`),
 * serving `remote` from the upstream at `upstreamBaseUrl`, with its log lines collected; closed
 * after the test.
 */
async function startLoggedServer(prefix: string, upstreamBaseUrl: string) {
  const workdir = mkdtempSync(join(folder, prefix));
  const logged: LogLine[] = [];
  const { destination } = collectLogLines(logged);
  const server = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(workdir, "tollgate.db")}`,
      models: [createUpstreamModelEntry("remote", upstreamBaseUrl)],
    }),
    logger: { level: "info", destination },
  });
  cleanups.push(() => server.close());
  return { server, logged, workdir };
}

describe("the end of a shutdown's drain", () => {
  it("tollgate serve: SIGTERM ends with a 'shut down' line, written before the exit", async () => {
    const workdir = mkdtempSync(join(folder, "cli-"));
    const configFile = writeServeConfig(workdir);
    const env = serveEnvironment();
    const child = spawn(process.execPath, [cli, "serve", "--config", configFile], {
      stdio: ["ignore", "pipe", "pipe"],
      env,
      cwd: workdir,
    });
    cleanups.push(() => {
      child.kill("SIGKILL");
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (data: Buffer) => {
      stdout += data.toString();
    });
    child.stderr.on("data", (data: Buffer) => {
      stderr += data.toString();
    });
    const exited = once(child, "exit") as Promise<[number | null, string | null]>;
    while (!stdout.includes("listening on")) {
      if (child.exitCode !== null) throw new Error(stdout + stderr);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    child.kill("SIGTERM");
    const [code, killedBy] = await exited;
    expect({ code, killedBy }, stdout + stderr).toEqual({ code: 0, killedBy: null });
    const lines = parseLines(stdout);
    const last = lines.at(-1);
    expect(last, stdout).toMatchObject({
      level: 30,
      msg: "shut down",
      graceMs: 8_000,
      requestsRunning: 0,
      requestsCut: 0,
    });
    expect(Number.isInteger(last?.ms)).toBe(true);
    expect(last).not.toHaveProperty("unrecordedCharges");
    expect(lines.findIndex((line) => line.msg === "shutting down")).toBe(lines.length - 2);
  });

  it.each([
    { name: "a request that ends within the grace", graceMs: 60_000, requestsCut: 0 },
    { name: "a request cut at the grace deadline", graceMs: 200, requestsCut: 1 },
  ])("counts $name", async ({ graceMs, requestsCut }) => {
    // The upstream answers once the test lets it: after the shutdown began, or never.
    const answer = Promise.withResolvers<void>();
    const held: MockHandler = async (request, response) => {
      await answer.promise;
      await streamText(["Hello"])(request, response);
    };
    const upstream = await startMockUpstream(held);
    cleanups.push(() => upstream.close());
    const { server, logged } = await startLoggedServer("server-", upstream.baseUrl);
    const pending = fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${server.createdKeys.starterKey ?? ""}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }] }),
    }).then((response) => response.text());
    while (upstream.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    const stopped = server.shutdown({ graceMs });
    if (requestsCut === 0) answer.resolve();
    await stopped;
    await pending;
    expect(logged.filter((line) => line.msg === "shut down")).toEqual([
      expect.objectContaining({ level: 30, graceMs, requestsRunning: 1, requestsCut }),
    ]);
    answer.resolve();
  });

  it("a close during a drain (a crash while shutting down) cuts its requests at once, and they are charged", async () => {
    // An upstream that waits until the test ends: only a cut ends the request.
    const never = Promise.withResolvers<void>();
    cleanups.push(() => never.resolve());
    const upstream = await startMockUpstream(async (request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "Hello" }, finish_reason: null }] })}\n\n`,
      );
      await never.promise;
      void request;
    });
    cleanups.push(() => upstream.close());
    const { server, logged, workdir } = await startLoggedServer("crash-during-drain-", upstream.baseUrl);
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${server.createdKeys.starterKey ?? ""}`,
        "content-type": "application/json",
        "x-request-id": "cut-by-close",
      },
      body: JSON.stringify({ model: "remote", messages: [{ role: "user", content: "Hi" }], stream: true }),
    });
    const body = response.text();
    // A drain with a grace far longer than the test, then the close a crash asks for.
    const draining = server.shutdown({ graceMs: 600_000 });
    await server.close();
    await draining;
    await body;
    expect(logged.filter((line) => line.msg === "shut down")).toEqual([
      expect.objectContaining({ graceMs: 600_000, requestsRunning: 1, requestsCut: 1 }),
    ]);
    const reopened = await openStore(`sqlite:${join(workdir, "tollgate.db")}`);
    try {
      const rows = (await reopened.listUsage()).filter((row) => row.requestId === "cut-by-close");
      expect(rows).toHaveLength(1);
      expect(rows[0]?.costNano).toBeGreaterThan(0n);
    } finally {
      await reopened.close();
    }
  });

  it("a close after the drain ended has nothing to cut and leaves no timer behind", async () => {
    const workdir = mkdtempSync(join(folder, "close-after-drain-"));
    const server = await startServer({
      config: createTestConfig({ database: `sqlite:${join(workdir, "tollgate.db")}`, models: [] }),
      logger: false,
    });
    await server.shutdown({ graceMs: 5_000 });
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
    const before = timers();
    await server.close();
    // It armed the 1 s timer that closes cut connections, on a server closed already.
    expect(timers()).toBe(before);
  });
});
