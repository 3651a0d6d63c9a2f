/**
 * Requests waiting for an upstream engine's connections when a reload replaces that engine (here:
 * a raised `max_connections`) are served by the engine they started on; the per-model gauge of
 * waiting requests used to read 0 meanwhile (it counted the new engine only), so an operator
 * who raised the limit to clear a backlog saw neither the backlog nor its end (found by a reload
 * review). Found and fixed: the gauge counts the replaced engine's requests until it closes.
 * Likewise for a reload that removed the model (found by a local engine review: its series
 * vanished while the old engine still ran its requests).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import type { CatalogModel, Config } from "../../src/catalog/catalog.ts";
import { type RunningServer, startServer } from "../../src/server.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createTestConfig } from "../support/test-server.ts";

const MODEL = "queued";

let folder: string;
let upstream: MockUpstream;
let server: RunningServer;
let store: Store;
let release: () => void;

function configWith(maxConnections: number, options: { removed?: boolean } = {}): Config {
  const model: CatalogModel = {
    id: MODEL,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "1" },
    contextLength: 8192,
    created: 1_700_000_300,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl: upstream.baseUrl, apiKey: undefined }],
      model: "m",
      fallbacks: [],
      maxConnections,
    },
  };
  return createTestConfig({
    database: `sqlite:${join(folder, "tollgate.db")}`,
    models: options.removed === true ? [] : [model],
  });
}

beforeEach(async () => {
  folder = mkdtempSync(join(tmpdir(), "tollgate-reload-queue-"));
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  upstream = await startMockUpstream(async (_request, response) => {
    await released;
    await writeEvents(response, textEvents(["Hi"], { usage: [10, 4] }));
  });
  server = await startServer({ config: configWith(1), logger: false });
  store = await openStore(`sqlite:${join(folder, "tollgate.db")}`);
});

afterEach(async () => {
  release();
  await server?.close();
  await store?.close();
  await upstream?.close();
  rmSync(folder, { recursive: true, force: true });
});

async function readMetrics(): Promise<string> {
  return await (await fetch(`${server.baseUrl.replace(/\/v1$/, "")}/metrics`)).text();
}

async function gauge(state: "running" | "waiting"): Promise<number | undefined> {
  const metrics = await readMetrics();
  const value = new RegExp(`tollgate_model_requests\\{model="${MODEL}",state="${state}"\\} (\\d+)`).exec(
    metrics,
  )?.[1];
  return value === undefined ? undefined : Number(value);
}

/** Three requests to the model: one runs on its one connection, two wait for it. */
async function sendThree(): Promise<Promise<Response>[]> {
  const account = await createAccount(store, { name: "acme", balanceNano: 1_000_000_000n });
  const { key } = await createKey(store, { role: "user", accountId: account.id });
  const replies = Array.from({ length: 3 }, () =>
    fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }),
    }),
  );
  await expect.poll(() => gauge("waiting")).toBe(2);
  expect(await gauge("running")).toBe(1);
  return replies;
}

describe("a reload that replaces an engine with requests waiting for its connections", () => {
  it("keeps counting them, under the model, until the replaced engine has served them", async () => {
    const replies = await sendThree();

    await server.reload(configWith(5));
    expect(await gauge("waiting")).toBe(2);
    expect(await gauge("running")).toBe(1);

    release();
    for (const reply of await Promise.all(replies)) expect(reply.status).toBe(200);
    await expect.poll(() => gauge("running")).toBe(0);
    expect(await gauge("waiting")).toBe(0);
  });

  it("keeps counting them under the id of a model the reload removed (regression: its series vanished while they ran), without a status, until they end", async () => {
    const replies = await sendThree();

    await server.reload(configWith(1, { removed: true }));
    expect(await gauge("waiting")).toBe(2);
    expect(await gauge("running")).toBe(1);
    expect(await readMetrics()).not.toContain(`tollgate_model_status{model="${MODEL}"`);

    release();
    for (const reply of await Promise.all(replies)) expect(reply.status).toBe(200);
    // The replaced engine closes once its requests are done (looked at each second, IDLE_CHECK_MS):
    // the model is gone from the metrics.
    await expect.poll(() => gauge("running"), { timeout: 5_000 }).toBeUndefined();
    expect(await gauge("waiting")).toBeUndefined();
  });
});
