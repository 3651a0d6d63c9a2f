import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../../src/server.ts";
import { createTestConfig } from "../support/test-server.ts";

// Regression: /metrics read its bearer token as one word (`\S+`), so a metrics_key with a space
// inside, which the config takes and the admin API reads whole, was refused on every scrape.

const folder = mkdtempSync(join(tmpdir(), "tollgate-metrics-key-"));
let server: RunningServer;

beforeAll(async () => {
  server = await startServer({
    config: createTestConfig({
      database: `sqlite:${join(folder, "tollgate.db")}`,
      models: [],
      metricsKey: "metrics secret",
    }),
    logger: false,
  });
});

afterAll(async () => {
  await server?.close();
  rmSync(folder, { recursive: true, force: true });
});

const origin = () => new URL(server.baseUrl).origin;
const scrape = async (authorization: string) =>
  (await fetch(`${origin()}/metrics`, { headers: { authorization } })).status;

describe("/metrics with a metrics_key that has a space inside", () => {
  it("takes the whole key, as the API reads a bearer token", async () => {
    expect(await scrape("Bearer metrics secret")).toBe(200);
    expect(await scrape("bearer   metrics secret  ")).toBe(200);
    expect(await scrape("Bearer metrics")).toBe(401);
    expect(await scrape("Bearer metrics  secret")).toBe(401);
    expect(await scrape("metrics secret")).toBe(401);
  });
});
