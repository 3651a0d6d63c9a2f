/**
 * `/metrics` shows each model's readiness as `/v1/models` reports it, and how many of an upstream
 * model's endpoints rest: what an operator alerts on before clients see 503s.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import {
  answerError,
  type MockUpstream,
  startMockUpstream,
  streamText,
} from "../engine/openai/mock-upstream.ts";
import { createUpstreamModelEntry, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/** Two endpoints; the first answers 429 with a long retry-after, the second answers. */
const HALF = "half-resting";
/** One endpoint, which answers 429 with a long retry-after: the model becomes unavailable. */
const RESTING = "all-resting";

let busy: MockUpstream;
let healthy: MockUpstream;

function withEndpoints(id: string, baseUrls: string[]): CatalogModel {
  const entry = createUpstreamModelEntry(id, baseUrls[0] ?? "");
  if (entry.engine?.type !== "openai") throw new Error("expected an upstream model");
  return {
    ...entry,
    engine: {
      ...entry.engine,
      endpoints: baseUrls.map((baseUrl) => ({ baseUrl, apiKey: undefined })),
      maxRetries: 1,
    },
  };
}

beforeAll(async () => {
  busy = await startMockUpstream();
  busy.handle(answerError(429, undefined, { "retry-after": "600" }));
  healthy = await startMockUpstream();
  healthy.handle(streamText(["Hi"], { usage: [5, 1] }));
});

afterAll(async () => {
  await busy?.close();
  await healthy?.close();
});

const server = useTestServer(() => ({
  extraModels: [withEndpoints(HALF, [busy.baseUrl, healthy.baseUrl]), withEndpoints(RESTING, [busy.baseUrl])],
}));

async function chat(model: string): Promise<number> {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "Hi" }] }),
  });
  await response.arrayBuffer();
  return response.status;
}

async function scrape(): Promise<string> {
  return (await fetch(`${server().origin}/metrics`)).text();
}

function sample(metrics: string, name: string, labels: string): string | undefined {
  const line = metrics.split("\n").find((each) => each.startsWith(`${name}{${labels}} `));
  return line?.slice(line.lastIndexOf(" ") + 1);
}

describe("model state in /metrics", () => {
  it("shows a local model loading, then every model available and every endpoint taking requests", async () => {
    let metrics = await scrape();
    const loading = sample(metrics, "tollgate_model_status", `model="${TINY_MODEL}",status="loading"`);
    expect(["0", "1"]).toContain(loading);
    if (loading === "1")
      expect(sample(metrics, "tollgate_model_status", `model="${TINY_MODEL}",status="available"`)).toBe("0");
    while ((await fetch(`${server().origin}/ready`)).status !== 200) await sleep(20);
    metrics = await scrape();
    for (const model of [TINY_MODEL, HALF, RESTING]) {
      expect(sample(metrics, "tollgate_model_status", `model="${model}",status="available"`)).toBe("1");
      expect(sample(metrics, "tollgate_model_status", `model="${model}",status="unavailable"`)).toBe("0");
      expect(sample(metrics, "tollgate_model_status", `model="${model}",status="loading"`)).toBe("0");
    }
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${HALF}",state="available"`)).toBe("2");
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${HALF}",state="resting"`)).toBe("0");
    // A local model has no endpoints.
    expect(metrics).not.toContain(`tollgate_upstream_endpoints{model="${TINY_MODEL}"`);
  });

  it("counts an endpoint resting on a retry-after, and a model whose every endpoint rests as unavailable", async () => {
    expect(await chat(HALF)).toBe(200);
    expect(await chat(RESTING)).toBe(503);
    const metrics = await scrape();
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${HALF}",state="available"`)).toBe("1");
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${HALF}",state="resting"`)).toBe("1");
    expect(sample(metrics, "tollgate_model_status", `model="${HALF}",status="available"`)).toBe("1");
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${RESTING}",state="available"`)).toBe("0");
    expect(sample(metrics, "tollgate_upstream_endpoints", `model="${RESTING}",state="resting"`)).toBe("1");
    expect(sample(metrics, "tollgate_model_status", `model="${RESTING}",status="unavailable"`)).toBe("1");
    expect(sample(metrics, "tollgate_model_status", `model="${RESTING}",status="available"`)).toBe("0");
  });
});
