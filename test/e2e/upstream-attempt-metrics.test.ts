/**
 * `/metrics` counts what the upstream engine does inside a request: each HTTP attempt at an
 * endpoint by outcome (`tollgate_upstream_attempts_total`) and each fallback a request went on to
 * (`tollgate_upstream_fallbacks_total`). A request served after a 500 on another endpoint, or by
 * a fallback model, used to look like a plain success; only the logs told. The counters go on
 * through a reload that gives the model a new engine, and leave with a model a reload removes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import {
  answerError,
  type MockUpstream,
  startMockUpstream,
  streamText,
} from "../engine/openai/mock-upstream.ts";
import { findFreePort } from "../support/free-port.ts";
import { createTestConfig } from "../support/test-server.ts";

/** Two endpoints: one always answers 500, the other answers. */
const RETRIED = "retried";
/** One endpoint where nothing listens; falls back to {@link BACKUP}. */
const REFUSED = "refused";
const BACKUP = "backup";

let folder: string;
let failing: MockUpstream;
let healthy: MockUpstream;
let closedPort: number;
let server: RunningServer;
let key: string;

function upstream(
  id: string,
  baseUrls: string[],
  options: { fallbacks?: string[]; maxRetries?: number } = {},
) {
  return {
    id,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "1" },
    contextLength: 8192,
    created: 1_700_000_400,
    engine: {
      type: "openai",
      endpoints: baseUrls.map((baseUrl) => ({ baseUrl, apiKey: "sk-upstream-secret-123456" })),
      model: "m",
      fallbacks: options.fallbacks ?? [],
      maxRetries: options.maxRetries ?? 2,
    },
  } satisfies CatalogModel;
}

function configWith(models: CatalogModel[]): Config {
  return createTestConfig({ database: `sqlite:${join(folder, "tollgate.db")}`, models });
}

function catalogue(options: { retriedMaxRetries?: number; withRefused?: boolean } = {}): CatalogModel[] {
  return [
    upstream(RETRIED, [failing.baseUrl, healthy.baseUrl], { maxRetries: options.retriedMaxRetries }),
    ...(options.withRefused === false
      ? []
      : [upstream(REFUSED, [`http://127.0.0.1:${closedPort}/v1`], { fallbacks: [BACKUP], maxRetries: 0 })]),
    upstream(BACKUP, [healthy.baseUrl]),
  ];
}

beforeAll(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-upstream-metrics-"));
  failing = await startMockUpstream(answerError(500));
  healthy = await startMockUpstream(streamText(["Hi"], { usage: [5, 1] }));
  closedPort = await findFreePort();
  server = await startServer({ config: configWith(catalogue()), logger: false });
  const store = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
  const account = await createAccount(store, { name: "acme", balanceNano: 1_000_000_000n });
  key = (await createKey(store, { role: "user", accountId: account.id })).key;
  await store.close();
});

afterAll(async () => {
  await server?.close();
  await failing?.close();
  await healthy?.close();
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
});

async function chat(model: string): Promise<number> {
  const response = await fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }),
  });
  await response.arrayBuffer();
  return response.status;
}

async function scrape(): Promise<string> {
  const response = await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/metrics`);
  expect(response.status).toBe(200);
  return response.text();
}

/** A sample's value, or `undefined` when the series is not there. */
function sample(metrics: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels)
    .map(([label, value]) => `${label}="${value}"`)
    .join(",");
  const line = metrics.split("\n").find((each) => each.startsWith(`${name}{${wanted}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

function attempts(metrics: string, model: string, endpoint: string, outcome: string): number | undefined {
  return sample(metrics, "tollgate_upstream_attempts_total", { model, endpoint, outcome });
}

describe("upstream attempts and fallbacks in /metrics", () => {
  it("shows every endpoint at 0 before any request, typed as counters", async () => {
    const metrics = await scrape();
    expect(metrics).toContain("# TYPE tollgate_upstream_attempts_total counter");
    expect(metrics).toContain("# TYPE tollgate_upstream_fallbacks_total counter");
    for (const outcome of ["ok", "http_error", "stream_error", "transport_error", "timeout", "cancelled"]) {
      expect(attempts(metrics, RETRIED, failing.baseUrl, outcome)).toBe(0);
      expect(attempts(metrics, RETRIED, healthy.baseUrl, outcome)).toBe(0);
    }
    expect(
      sample(metrics, "tollgate_upstream_fallbacks_total", {
        model: REFUSED,
        fallback: BACKUP,
        outcome: "served",
      }),
    ).toBe(0);
    // Neither the key nor anything but the base URL is in a label.
    expect(metrics).not.toContain("sk-upstream");
  });

  it("counts a 500 on one endpoint and the success on the other, each under its endpoint", async () => {
    // The balancer may begin with either: a request that meets the failing one is retried.
    while (failing.requests.length === 0) expect(await chat(RETRIED)).toBe(200);
    const metrics = await scrape();
    expect(attempts(metrics, RETRIED, failing.baseUrl, "http_error")).toBe(1);
    expect(attempts(metrics, RETRIED, failing.baseUrl, "ok")).toBe(0);
    expect(attempts(metrics, RETRIED, healthy.baseUrl, "ok")).toBe(healthy.requests.length);
    expect(attempts(metrics, RETRIED, healthy.baseUrl, "http_error")).toBe(0);
  });

  it("counts a refused connection as transport_error, and the fallback that served the request", async () => {
    const served = healthy.requests.length;
    expect(await chat(REFUSED)).toBe(200);
    expect(healthy.requests.length).toBe(served + 1);
    const metrics = await scrape();
    const refusedEndpoint = `http://127.0.0.1:${closedPort}/v1`;
    expect(attempts(metrics, REFUSED, refusedEndpoint, "transport_error")).toBe(1);
    expect(attempts(metrics, REFUSED, refusedEndpoint, "ok")).toBe(0);
    expect(
      sample(metrics, "tollgate_upstream_fallbacks_total", {
        model: REFUSED,
        fallback: BACKUP,
        outcome: "served",
      }),
    ).toBe(1);
    // The fallback's own attempt counts under the fallback model.
    expect(attempts(metrics, BACKUP, healthy.baseUrl, "ok")).toBe(1);
  });

  it("keeps counting through a reload that gives the model a new engine, and drops a removed model's series", async () => {
    const before = await scrape();
    const httpErrors = attempts(before, RETRIED, failing.baseUrl, "http_error") as number;
    const oks = attempts(before, RETRIED, healthy.baseUrl, "ok") as number;
    expect(oks).toBeGreaterThan(0);

    // A changed `max_retries` makes a new engine for the model (ModelRegistry.replace).
    await server.reload(configWith(catalogue({ retriedMaxRetries: 3, withRefused: false })));
    let metrics = await scrape();
    expect(attempts(metrics, RETRIED, failing.baseUrl, "http_error")).toBe(httpErrors);
    expect(attempts(metrics, RETRIED, healthy.baseUrl, "ok")).toBe(oks);
    // A removed model's upstream series go, as its other gauges do (its requests' counters stay).
    expect(metrics).not.toContain(`tollgate_upstream_attempts_total{model="${REFUSED}"`);
    expect(metrics).not.toContain(`tollgate_upstream_fallbacks_total{model="${REFUSED}"`);

    expect(await chat(RETRIED)).toBe(200);
    metrics = await scrape();
    const after =
      (attempts(metrics, RETRIED, failing.baseUrl, "http_error") as number) +
      (attempts(metrics, RETRIED, healthy.baseUrl, "ok") as number);
    expect(after).toBeGreaterThan(httpErrors + oks);
    expect(attempts(metrics, RETRIED, healthy.baseUrl, "ok")).toBe(oks + 1);
  });
});
