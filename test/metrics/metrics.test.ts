import { describe, expect, it } from "vitest";
import { Metrics, type RequestObservation } from "../../src/metrics/metrics.ts";

function metrics(): Metrics {
  return new Metrics({ inFlight: () => 0, models: () => [] });
}

const base: RequestObservation = {
  route: "/v1/chat/completions",
  model: "asked",
  status: 200,
  seconds: 0.5,
  promptTokens: 13,
  completionTokens: 4,
  costNano: 53_000n,
  firstTokenSeconds: 0.1,
  engineSeconds: 0.4,
};

/** The sample lines of `name` in the Prometheus text. */
async function samples(from: Metrics, name: string): Promise<string[]> {
  const { body } = await from.render();
  return body.split("\n").filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe("Metrics", () => {
  it("sums cost exactly, as the ledger does (regression: 3 x 0.000053 read 0.00015900000000000002)", async () => {
    const observed = metrics();
    for (let index = 0; index < 3; index++) observed.observe(base);
    expect(await samples(observed, "tollgate_cost_total")).toEqual([
      'tollgate_cost_total{model="asked"} 0.000159',
    ]);
  });

  it("counts a fallback's tokens, cost and first token under the model that served, the request under the one asked for", async () => {
    const observed = metrics();
    observed.observe({ ...base, servedModel: "fallback" });
    expect(await samples(observed, "tollgate_requests_total")).toEqual([
      'tollgate_requests_total{route="/v1/chat/completions",model="asked",status="200"} 1',
    ]);
    expect(await samples(observed, "tollgate_tokens_total")).toEqual([
      'tollgate_tokens_total{model="fallback",direction="prompt"} 13',
      'tollgate_tokens_total{model="fallback",direction="completion"} 4',
    ]);
    expect(await samples(observed, "tollgate_cost_total")).toEqual([
      'tollgate_cost_total{model="fallback"} 0.000053',
    ]);
    expect(await samples(observed, "tollgate_time_to_first_token_seconds_count")).toEqual([
      'tollgate_time_to_first_token_seconds_count{model="fallback"} 1',
    ]);
  });
});
