/**
 * Requests Node's HTTP parser refuses (not HTTP, headers over 16 KiB) are answered in the
 * contract's shape before any route or hook runs; they count in `tollgate_requests_total` too,
 * under route "unknown" (regression: a flood of broken clients left the metrics unchanged), and
 * have their request log line (regression: counted, never logged).
 */

import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/api/build-app.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";
import { collectLogLines } from "../support/collect-log-lines.ts";
import { acceptOneKey } from "./accept-one-key.ts";
import { exchangeRaw } from "./exchange-raw.ts";

let app: FastifyInstance;
let port: number;
const lines: Record<string, unknown>[] = [];

beforeAll(async () => {
  app = buildApp({
    registry: new ModelRegistry([], () => undefined),
    logger: pino(collectLogLines(lines).destination),
    authenticate: acceptOneKey,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  port = typeof address === "object" && address !== null ? address.port : 0;
});

afterAll(async () => {
  await app?.close();
});

/** Writes `text` on a new connection and answers what came back before it closed. */
async function sendRaw(text: string): Promise<string> {
  return (await exchangeRaw(port, [text])).text;
}

async function unroutedCount(status: number): Promise<number> {
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = metrics
    .split("\n")
    .find(
      (each) =>
        each.startsWith("tollgate_requests_total{") &&
        each.includes('route="unknown"') &&
        each.includes(`status="${status}"`),
    );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("requests the HTTP parser refuses", () => {
  it("count as requests of no route, by the status they were answered", async () => {
    const before = { invalid: await unroutedCount(400), tooLarge: await unroutedCount(431) };
    expect(await sendRaw("NOT-HTTP at all\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 /);
    expect(await sendRaw("BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 /);
    expect(await sendRaw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`)).toMatch(
      /^HTTP\/1\.1 431 /,
    );
    expect(await unroutedCount(400)).toBe(before.invalid + 2);
    expect(await unroutedCount(431)).toBe(before.tooLarge + 1);
  });

  it("have their request log line, naming the status, the error and the answer's request id", async () => {
    lines.splice(0);
    const answers = [
      await sendRaw("NOT-HTTP at all\r\n\r\n"),
      await sendRaw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`),
    ];
    // Regression: the line had no request id, though the answer carried one.
    const ids = answers.map((answer) => /\r\nx-request-id: (\S+)\r\n/.exec(answer)?.[1]);
    expect(ids.every((id) => id !== undefined && /^req_/.test(id))).toBe(true);
    const requests = lines.filter((line) => line.msg === "request");
    expect(requests).toMatchObject([
      { reqId: ids[0], route: "unknown", status: 400, error: "invalid_http_request" },
      { reqId: ids[1], route: "unknown", status: 431, error: "headers_too_large" },
    ]);
  });
});
