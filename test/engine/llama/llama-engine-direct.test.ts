/**
 * The direct path (generate-directly.ts) against LlamaChat: the same requests, run by an engine
 * on each path, must give the same text and the same finish (reason, raw reason, usage).
 */
import { getLlama, type Llama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ChatEngine, ChatRequest, StreamPart } from "../../../src/engine/engine.ts";
import { createLlamaEngine } from "../../../src/engine/llama/create-llama-engine.ts";
import { getTestModelPath } from "../../support/test-model.ts";
import {
  collectParts,
  createTestCatalogModel,
  createTestRequest,
  readEnd,
  readText,
} from "./llama-test-support.ts";

/** Runs of the direct path, to check that each engine takes the path it should. */
const directRuns = vi.hoisted(() => ({ count: 0 }));
vi.mock("../../../src/engine/llama/generate-directly.ts", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../../src/engine/llama/generate-directly.ts")>();
  return {
    ...actual,
    generateDirectly: (options: Parameters<typeof actual.generateDirectly>[0]) => {
      directRuns.count += 1;
      return actual.generateDirectly(options);
    },
  };
});

interface Engines {
  direct: ChatEngine;
  llamaChat: ChatEngine;
}

let llama: Llama;
/** Generations end after a few tokens (the test model's end bias). */
let ending: Engines;
/** Generations never end by themselves: they run to max_tokens or a stop string. */
let endless: Engines;

async function createEngines(path: string): Promise<Engines> {
  const create = (directGeneration: boolean) =>
    createLlamaEngine({
      model: createTestCatalogModel({ path, contextLength: 1024 }),
      llama: async () => llama,
      directGeneration,
    });
  return { direct: create(true), llamaChat: create(false) };
}

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: "never" });
  ending = await createEngines(await getTestModelPath());
  endless = await createEngines(await getTestModelPath({ endless: true }));
});

afterAll(async () => {
  for (const engines of [ending, endless]) {
    await engines?.direct.close();
    await engines?.llamaChat.close();
  }
});

interface Outcome {
  text: string;
  /** The text deltas, one per released chunk of tokens. */
  deltas: string[];
  /** The `finish` or `error` part, without its `queueMs`. */
  end: WithoutQueueMs<Extract<StreamPart, { type: "finish" | "error" }>>;
}

type WithoutQueueMs<Part> = Part extends unknown ? Omit<Part, "queueMs"> : never;

async function run(engine: ChatEngine, request: ChatRequest): Promise<Outcome> {
  const parts = await collectParts(await engine.prepare(request));
  const deltas = parts.flatMap((part) => (part.type === "text-delta" ? [part.text] : []));
  // The time spent waiting for a sequence differs from run to run (0 or 1 ms).
  const { queueMs: _queueMs, ...end } = readEnd(parts);
  return { text: readText(parts), deltas, end };
}

/** Runs `request` on both paths, expects the same text and finish, and answers LlamaChat's outcome. */
async function expectSame(engines: Engines, request: ChatRequest): Promise<Outcome> {
  const runsBefore = directRuns.count;
  const llamaChat = await run(engines.llamaChat, request);
  expect(directRuns.count).toBe(runsBefore);
  const direct = await run(engines.direct, request);
  expect(directRuns.count).toBe(runsBefore + 1);
  expect(direct.text).toBe(llamaChat.text);
  expect(direct.end).toEqual(llamaChat.end);
  return llamaChat;
}

/**
 * A stop string that starts inside one text delta and ends in a later one, chosen so that its first
 * occurrence is there, with the text before it: from a generation without stops.
 */
function findSpanningStop(outcome: Outcome, deltas: number): { stop: string; before: string } {
  // Whole characters only: a stop string must not start or end inside a surrogate pair.
  const startsWhole = (text: string | undefined) => text !== undefined && /^[^\uD800-\uDFFF]/.test(text);
  let offset = 0;
  for (const [index, delta] of outcome.deltas.entries()) {
    offset += delta.length;
    const middle = outcome.deltas.slice(index + 1, index + deltas - 1);
    const last = outcome.deltas[index + deltas - 1];
    const reversed = [...delta].reverse().join("");
    if (!startsWhole(reversed) || !startsWhole(last) || middle.some((text) => text === "")) continue;
    const stop = `${delta.slice(-1)}${middle.join("")}${last?.slice(0, 1)}`;
    const start = offset - 1;
    if (outcome.text.indexOf(stop) !== start) continue;
    return { stop, before: outcome.text.slice(0, start) };
  }
  throw new Error(`no stop string spanning ${deltas} deltas in ${JSON.stringify(outcome.deltas)}`);
}

describe("direct path against LlamaChat", () => {
  it("generates the same text greedily, to the end-of-generation token", async () => {
    const outcome = await expectSame(ending, createTestRequest());
    expect(outcome.end).toMatchObject({ type: "finish", reason: "stop", rawReason: "eogToken" });
  });

  it.each([1, 2, 3, 4, 5])("generates the same text at temperature 1 with seed %i", async (seed) => {
    await expectSame(ending, createTestRequest({ temperature: 1, seed }));
  });

  it("removes the template's ignored start text alike", async () => {
    // The test template ignores a leading space or tab; some of these seeds start with one.
    for (const seed of [0, 9, 12, 13, 15]) {
      await expectSame(ending, createTestRequest({ temperature: 1, seed, maxTokens: 4 }));
      await expectSame(endless, createTestRequest({ temperature: 1, seed, maxTokens: 4 }));
    }
  });

  // Regression: a stop string was matched against the ignored start text (a leading space no
  // client sees) and released it in front of the text before the stop.
  it("matches stop strings in the text without the ignored start, alike", async () => {
    let ignoredStarts = 0;
    for (const seed of [15, 43, 63]) {
      const request = createTestRequest({ temperature: 1, seed, maxTokens: 12 });
      const full = await expectSame(endless, request);
      const first = full.text.charAt(0);
      const stopped = await expectSame(endless, { ...request, stop: [first] });
      expect(stopped.text, `seed ${seed}`).toBe("");
      // The ignored space itself, and with the first character, is never seen: no stop.
      const unseen = await expectSame(endless, { ...request, stop: [` ${first}`] });
      if (unseen.text === full.text) ignoredStarts += 1;
    }
    expect(ignoredStarts).toBe(3);
  });

  it.each([1, 2])("cuts at max_tokens in the same place (seed %i)", async (seed) => {
    const outcome = await expectSame(endless, createTestRequest({ temperature: 1, seed, maxTokens: 37 }));
    expect(outcome.end).toMatchObject({
      reason: "length",
      rawReason: "maxTokens",
      usage: { completionTokens: 37 },
    });
  });

  it("applies frequency and presence penalties alike", async () => {
    const penalties = { frequencyPenalty: 1.5, presencePenalty: -0.5, temperature: 0.7 };
    await expectSame(endless, createTestRequest({ ...penalties, seed: -5, maxTokens: 80 }));
    await expectSame(ending, createTestRequest({ ...penalties, seed: 11, maxTokens: 80 }));
    await expectSame(endless, createTestRequest({ frequencyPenalty: 2, temperature: 0, maxTokens: 80 }));
  });

  it.each([2, 3])("stops before a stop string that spans %i text deltas", async (deltas) => {
    const request = createTestRequest({ temperature: 1, seed: 3, maxTokens: 120 });
    const full = await expectSame(endless, request);
    const { stop, before } = findSpanningStop(full, deltas);
    const stopped = await expectSame(endless, { ...request, stop: ["never generated", stop] });
    expect(stopped.text).toBe(before);
    expect(stopped.end).toMatchObject({ reason: "stop", rawReason: "customStopTrigger" });
  });

  it("releases text held for a stop string that does not complete", async () => {
    const request = createTestRequest({ temperature: 1, seed: 4, maxTokens: 60 });
    const full = await expectSame(endless, request);
    // Starts with frequent characters, so text is held often, but never completes.
    const stops = [...new Set(full.text)].slice(0, 4).map((character) => `${character}\u0000never`);
    const held = await expectSame(endless, { ...request, stop: stops });
    expect(held.text.length).toBeGreaterThan(0);
    expect(held.end).toMatchObject({ reason: "length" });
  });

  // Regression: tokens held for a stop string were left out of the penalty's window, so a stop
  // string that never matched changed the text sampled with a frequency penalty.
  it.each([3, 4])(
    "samples with penalties as if no stop string were there, until one matches (seed %i)",
    async (seed) => {
      const request = createTestRequest({
        temperature: 1,
        seed,
        frequencyPenalty: 1,
        presencePenalty: 1,
        maxTokens: 60,
      });
      const full = await expectSame(endless, request);
      // The text's first 30 characters begin the stop string: held while they are generated.
      expect(full.text.length).toBeGreaterThan(30);
      const held = await expectSame(endless, { ...request, stop: [`${full.text.slice(0, 30)}\u0000never`] });
      expect(held.text).toBe(full.text);
      expect(held.end).toEqual(full.end);
    },
  );

  // Regression: the held text was dropped (as LlamaChat drops it), though generated and billed.
  it("releases text held for a possible stop string when max_tokens cuts", async () => {
    const request = createTestRequest({ temperature: 1, seed: 5, maxTokens: 25 });
    const full = await expectSame(endless, request);
    const last = full.deltas.at(-1) ?? "";
    expect(last).not.toBe("");
    const held = await run(endless.direct, { ...request, stop: [`${last}\u0000never`] });
    expect(held.text).toBe(full.text);
    expect(held.end).toEqual(full.end);
  });

  it.each([1, 2, 3])("generates the same JSON object (seed %i)", async (seed) => {
    const outcome = await expectSame(
      ending,
      createTestRequest({ responseFormat: { type: "json_object" }, temperature: 1, seed, maxTokens: 300 }),
    );
    expect(outcome.end).toMatchObject({ reason: "stop" });
  });

  it("writes properties named like built-in object keys (__proto__, constructor) as any other", async () => {
    // Parsed from JSON, as a client's body brings it: `__proto__` is an own key (in an object
    // literal it would set the prototype).
    const parsedSchema = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"integer"},"constructor":{"type":"boolean"},"b":{"type":"boolean"}},"required":["__proto__","constructor","b"],"additionalProperties":false}',
    ) as Record<string, unknown>;
    let complete = 0;
    for (const seed of [1, 2, 3]) {
      const outcome = await expectSame(
        ending,
        createTestRequest({
          responseFormat: { type: "json_schema", name: "keys", schema: parsedSchema },
          temperature: 1,
          seed,
          maxTokens: 200,
        }),
      );
      if (outcome.end.type !== "finish" || outcome.end.reason !== "stop") continue;
      complete += 1;
      expect(Object.keys(JSON.parse(outcome.text) as object)).toEqual(["__proto__", "constructor", "b"]);
    }
    expect(complete).toBeGreaterThan(0);
  });

  it("generates the same JSON for a json_schema", async () => {
    const schema = {
      type: "object",
      properties: {
        title: { type: "string", maxLength: 20 },
        tags: { type: "array", items: { type: "string" } },
      },
      required: ["title", "tags"],
      additionalProperties: false,
    };
    for (const seed of [1, 2]) {
      await expectSame(
        ending,
        createTestRequest({
          responseFormat: { type: "json_schema", name: "review", schema, strict: true },
          temperature: 1,
          seed,
          maxTokens: 300,
        }),
      );
    }
  });
});
