import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../../src/server.ts";
import { upstreamModel } from "../engine/openai/engine-helpers.ts";
import { type MockUpstream, startMockUpstream } from "../engine/openai/mock-upstream.ts";
import { createTestConfig } from "../support/test-server.ts";

// Regression: the metrics' model label was the request log's `model`, cut at 256 characters for
// the log line: a longer catalogue id got a label that matched neither the catalogue, nor
// `tollgate_model_status`, nor the usage rows.

const LONG_ID = `long-${"x".repeat(295)}`;
const folder = mkdtempSync(join(tmpdir(), "tollgate-metrics-long-id-"));
let upstream: MockUpstream;
let server: RunningServer;

beforeAll(async () => {
  upstream = await startMockUpstream();
  server = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      models: [upstreamModel([upstream.baseUrl], { id: LONG_ID })],
    }),
    logger: false,
  });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

describe("metrics of a model whose id is longer than a log line repeats", () => {
  it("label it with the whole catalogue id", async () => {
    const key = server.createdKeys.starterKey;
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: LONG_ID, messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(response.status).toBe(200);
    await response.text();
    const metrics = await (await fetch(`${new URL(server.baseUrl).origin}/metrics`)).text();
    const requests = metrics.split("\n").filter((line) => line.startsWith("tollgate_requests_total{"));
    expect(
      requests.some((line) => line.includes(`model="${LONG_ID}"`) && line.includes('status="200"')),
    ).toBe(true);
    const tokens = metrics.split("\n").filter((line) => line.startsWith("tollgate_tokens_total{"));
    expect(tokens.length).toBeGreaterThan(0);
    for (const line of tokens) expect(line).toContain(`model="${LONG_ID}"`);
  });
});
