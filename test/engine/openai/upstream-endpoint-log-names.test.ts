/**
 * Log lines name an upstream endpoint as `/metrics` does: two of a model's endpoints on one base
 * URL (one server, two keys) are `URL#1` and `URL#2` in both. The log named both by the bare URL,
 * which matched neither series.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { EngineLogger } from "../../../src/engine/create-engine.ts";
import {
  closeEnginesAndMocks,
  createTestEngine,
  firstError,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { answerError } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** A logger that keeps the fields of every line it is given. */
function recordingLogger(): EngineLogger & { lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const record = (object: object, message?: string) => {
    lines.push({ msg: message, ...object });
  };
  return { lines, info: record, warn: record, error: record };
}

describe("upstream endpoint names in log lines", () => {
  it("names two endpoints on one URL by their place in the list, as /metrics does", async () => {
    const upstream = await startTestMock(answerError(500));
    const logger = recordingLogger();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl, upstream.baseUrl]),
      logger,
      settings: { maxRetries: 1 },
    });
    await firstError(engine);
    const named = logger.lines
      .filter((line) => line.msg === "upstream attempt failed")
      .map((line) => line.endpoint);
    expect(new Set(named)).toEqual(new Set([`${upstream.baseUrl}#1`, `${upstream.baseUrl}#2`]));
    const counted = (engine.upstreamActivity?.().attempts ?? []).filter((each) => each.count > 0);
    expect(new Set(counted.map((each) => each.endpoint))).toEqual(new Set(named));
  });

  it("names an endpoint alone on its URL by the URL", async () => {
    const upstream = await startTestMock(answerError(500));
    const logger = recordingLogger();
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      logger,
      settings: { maxRetries: 0 },
    });
    await firstError(engine);
    expect(logger.lines.find((line) => line.msg === "upstream attempt failed")?.endpoint).toBe(
      upstream.baseUrl,
    );
  });
});
