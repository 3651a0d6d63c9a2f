/**
 * A request whose connection closes before its answer is complete still gets its one log line
 * and its metrics: 499 when its client left (its body never finished, on the chat route too,
 * before any handler ran), and the answer Node gave on the socket (408) when the server cut it.
 * Fastify's onResponse hook, which records every other request, never runs for these.
 */
import { connect } from "node:net";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp, CLIENT_CLOSED_STATUS } from "../../src/api/build-app.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { acceptOneKey } from "./accept-one-key.ts";

const REQUEST_TIMEOUT_MS = 400;

const logLines: Record<string, unknown>[] = [];
let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  const logger = pino({}, { write: (line: string) => void logLines.push(JSON.parse(line)) });
  app = buildApp({
    registry: new ModelRegistry([], () => undefined),
    logger,
    authenticate: acceptOneKey,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
    headersTimeoutMs: 200,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  port = typeof address === "object" && address !== null ? address.port : 0;
});

afterAll(async () => {
  await app?.close();
});

/** Sends a request head and part of its body; the client closes after `leaveAfterMs`, else the server does. */
function sendPartOfBody(path: string, leaveAfterMs?: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (data: string) => {
      text += data;
    });
    socket.on("error", () => {});
    socket.on("close", () => resolve(text));
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":`,
    );
    if (leaveAfterMs !== undefined) setTimeout(() => socket.destroy(), leaveAfterMs);
  });
}

/** The log lines of requests, once there are `count` of them (each request writes one). */
async function requestLines(count: number): Promise<Record<string, unknown>[]> {
  const lines = () => logLines.filter((line) => line.msg === "request");
  await expect.poll(() => lines().length, { timeout: 10_000 }).toBeGreaterThanOrEqual(count);
  return lines();
}

async function requestCount(status: number): Promise<number> {
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let count = 0;
  for (const line of metrics.split("\n"))
    if (line.startsWith("tollgate_requests_total{") && line.includes(`status="${status}"`))
      count += Number(line.slice(line.lastIndexOf(" ") + 1));
  return count;
}

describe("a request whose connection closes before its answer", () => {
  it("is recorded as 499 when its client leaves during the body; a path no route serves answers before it", async () => {
    logLines.length = 0;
    await sendPartOfBody("/v1/chat/completions", 50);
    // Its body is never read (nothing would read it): the 404 goes out at once.
    expect(await sendPartOfBody("/admin/nothing-here", 50)).toMatch(/^HTTP\/1\.1 404 /);
    const lines = await requestLines(2);
    expect(lines).toHaveLength(2);
    expect(lines.find((line) => line.route === "/v1/chat/completions")).toMatchObject({
      status: CLIENT_CLOSED_STATUS,
      error: "client_closed",
    });
    expect(lines.find((line) => line.route !== "/v1/chat/completions")).toMatchObject({
      status: 404,
      error: "not_found",
    });
    expect(await requestCount(CLIENT_CLOSED_STATUS)).toBe(1);
    // Node's "aborted" (ECONNRESET) of a body cut short is the client's doing, not a database
    // outage (regression: logged as "the store is unavailable", found by fuzzing).
    expect(logLines.filter((line) => line.level !== 30).map((line) => line.msg)).toEqual([]);
  });

  it("is recorded with the 408 the server answered when its body stopped arriving, not as a client that left", async () => {
    logLines.length = 0;
    const answer = await sendPartOfBody("/v1/chat/completions");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    const lines = await requestLines(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ status: 408, error: "request_timeout" });
    expect(await requestCount(408)).toBe(1);
  });
});
