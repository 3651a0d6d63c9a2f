/**
 * A request the upstream failed before its answer began (a 500, a 429, no first byte in time)
 * has its engine time too: its log line carries `engineMs` and `tollgate_gateway_overhead_seconds`
 * observes it, as for an answered one. Only the success path annotated it: such requests were
 * left out of the histogram (40 observations for 43 requests that reached an engine) and their
 * log lines had no `engineMs`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import {
  answerError,
  type MockHandler,
  type MockUpstream,
  startMockUpstream,
  streamText,
} from "../engine/openai/mock-upstream.ts";
import { createTestConfig } from "../support/test-server.ts";

/** How each model's upstream answers; `silent` never does, past its 200 ms first-byte timeout. */
const HANDLERS: Record<string, MockHandler> = {
  served: streamText(["Hi"], { usage: [5, 1] }),
  failing: answerError(500),
  limited: answerError(429, { error: { message: "slow down", type: "rate_limit", code: null } }),
  silent: () => new Promise(() => {}),
};

let folder: string;
const upstreams: MockUpstream[] = [];
let server: RunningServer;
let key: string;
const lines: Record<string, unknown>[] = [];

function upstreamModel(id: string, baseUrl: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "1" },
    contextLength: 8192,
    created: 1_700_000_400,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl, apiKey: "sk-upstream-secret-123456" }],
      model: "m",
      fallbacks: [],
      maxRetries: 0,
      firstByteTimeoutMs: 200,
    },
  };
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-overhead-"));
  const models: CatalogModel[] = [];
  for (const [id, handler] of Object.entries(HANDLERS)) {
    const upstream = await startMockUpstream(handler);
    upstreams.push(upstream);
    models.push(upstreamModel(id, upstream.baseUrl));
  }
  const destination = new PassThrough();
  let pending = "";
  destination.on("data", (data: Buffer) => {
    pending += data.toString();
    const complete = pending.split("\n");
    pending = complete.pop() ?? "";
    for (const line of complete) if (line.trim() !== "") lines.push(JSON.parse(line));
  });
  server = await startServer({
    config: createTestConfig({ database: `sqlite:${join(folder, "tollgate.db")}`, models }),
    logger: { destination },
  });
  const store = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
  const account = await createAccount(store, { name: "acme", balanceNano: 1_000_000_000n });
  key = (await createKey(store, { role: "user", accountId: account.id })).key;
  await store.close();
});

afterAll(async () => {
  await server?.close();
  await Promise.all(upstreams.map((upstream) => upstream.close()));
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
});

/** Sends a chat request for `model`; its status and request id. */
async function chat(model: string): Promise<{ status: number; requestId: string | null }> {
  const response = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }),
  });
  await response.arrayBuffer();
  return { status: response.status, requestId: response.headers.get("x-request-id") };
}

/** The `request` log line of `requestId`, once written. */
async function requestLine(requestId: string | null): Promise<Record<string, unknown> | undefined> {
  const find = () => lines.find((line) => line.reqId === requestId && line.msg === "request");
  for (let attempt = 0; attempt < 50 && find() === undefined; attempt++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  return find();
}

async function overheadCount(): Promise<number> {
  const response = await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/metrics`);
  const text = await response.text();
  const line = text
    .split("\n")
    .find((each) => each.startsWith('tollgate_gateway_overhead_seconds_count{route="/v1/chat/completions"}'));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("gateway overhead of requests the upstream failed", () => {
  for (const [model, status] of [
    ["served", 200],
    ["failing", 503],
    ["limited", 503],
    ["silent", 503],
  ] as const) {
    it(`gives a ${model} request (${status}) its engine time, in its log line and in /metrics`, async () => {
      const before = await overheadCount();
      const answer = await chat(model);
      expect(answer.status).toBe(status);
      const line = await requestLine(answer.requestId);
      expect(line).toMatchObject({ status, model });
      expect(typeof line?.engineMs).toBe("number");
      // Within the request's own time, and for the silent one at least its timeout's wait.
      expect(Number(line?.engineMs)).toBeLessThanOrEqual(Number(line?.ms) + 1);
      if (model === "silent") expect(Number(line?.engineMs)).toBeGreaterThanOrEqual(190);
      expect(await overheadCount()).toBe(before + 1);
    });
  }
});
