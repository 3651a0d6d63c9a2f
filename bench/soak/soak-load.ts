import type { Agent } from "node:http";
import { type ChatOutcome, postChatCompletion } from "../local/chat-client.ts";

/** The kinds of request the soak mixes. */
export type SoakRequestKind = "plain" | "stream" | "aborted-stream" | "tools" | "json";

/** How often each kind is picked (weights, not necessarily summing to 1). */
const kindWeights: readonly [SoakRequestKind, number][] = [
  ["plain", 0.3],
  ["stream", 0.3],
  ["aborted-stream", 0.15],
  ["tools", 0.15],
  ["json", 0.1],
];

const prompts = [
  "Hello there, how are you today?",
  "Write a short poem about the sea.",
  "Explain how a lighthouse works, step by step.",
  "What is the weather like in Lisbon in spring?",
  "List three facts about cats.",
];

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The current weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
    },
  },
};

const timeTool = {
  type: "function",
  function: { name: "get_time", description: "The current time in a time zone." },
};

const personSchema = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["name", "age"],
};

/** A seeded pseudo-random generator (mulberry32): the same seed gives the same load. */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<Item>(random: () => number, items: readonly Item[]): Item {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error("pick from an empty list");
  return item;
}

function pickKind(random: () => number): SoakRequestKind {
  const total = kindWeights.reduce((sum, [, weight]) => sum + weight, 0);
  let threshold = random() * total;
  for (const [kind, weight] of kindWeights) {
    threshold -= weight;
    if (threshold < 0) return kind;
  }
  return "plain";
}

/** One soak request: its kind, body, and where the client cuts it. */
export interface SoakRequest {
  kind: SoakRequestKind;
  body: Record<string, unknown>;
  abortAfterChunks: number | undefined;
}

/** Builds a random request of a random kind for `model`. */
export function createSoakRequest(random: () => number, model: string): SoakRequest {
  const kind = pickKind(random);
  const base: Record<string, unknown> = {
    model,
    messages: [
      ...(random() < 0.5 ? [{ role: "system", content: "You are a helpful assistant." }] : []),
      { role: "user", content: pick(random, prompts) },
    ],
    max_tokens: 8 + Math.floor(random() * 56),
    temperature: Math.round(random() * 12) / 10,
    ...(random() < 0.5 ? { seed: Math.floor(random() * 1_000_000) } : {}),
  };
  switch (kind) {
    case "plain":
      return { kind, body: base, abortAfterChunks: undefined };
    case "stream":
      return { kind, body: { ...base, stream: true }, abortAfterChunks: undefined };
    case "aborted-stream":
      return {
        kind,
        body: { ...base, max_tokens: 64, stream: true },
        abortAfterChunks: 1 + Math.floor(random() * 4),
      };
    case "tools":
      return {
        kind,
        body: {
          ...base,
          stream: random() < 0.5,
          tools: random() < 0.5 ? [weatherTool] : [weatherTool, timeTool],
          tool_choice: pick(random, [
            "auto",
            "required",
            { type: "function", function: { name: "get_weather" } },
          ] as const),
        },
        abortAfterChunks: undefined,
      };
    case "json":
      return {
        kind,
        body: {
          ...base,
          stream: random() < 0.5,
          response_format:
            random() < 0.5
              ? { type: "json_object" }
              : { type: "json_schema", json_schema: { name: "person", schema: personSchema } },
        },
        abortAfterChunks: undefined,
      };
    default: {
      const unreachable: never = kind;
      throw new Error(`unknown request kind ${String(unreachable)}`);
    }
  }
}

/** Counts of what the soak's clients did, by kind. */
export interface SoakTally {
  requests: Record<SoakRequestKind, number>;
  completionTokens: number;
  aborted: number;
  /** Unexpected outcomes by `kind status code`, e.g. `plain 503 model_overloaded`. */
  failures: Map<string, number>;
}

export function createSoakTally(): SoakTally {
  return {
    requests: { plain: 0, stream: 0, "aborted-stream": 0, tools: 0, json: 0 },
    completionTokens: 0,
    aborted: 0,
    failures: new Map(),
  };
}

/** Runs one client: requests one after another until `deadline` (a `performance.now()` time). */
export async function runSoakClient(options: {
  baseUrl: string;
  key: string;
  agent: Agent;
  model: string;
  seed: number;
  deadline: number;
  tally: SoakTally;
}): Promise<void> {
  const random = createRandom(options.seed);
  while (performance.now() < options.deadline) {
    const request = createSoakRequest(random, options.model);
    let outcome: ChatOutcome;
    try {
      outcome = await postChatCompletion({
        baseUrl: options.baseUrl,
        key: options.key,
        agent: options.agent,
        body: request.body,
        ...(request.abortAfterChunks === undefined ? {} : { abortAfterChunks: request.abortAfterChunks }),
      });
    } catch (error) {
      const key = `${request.kind} transport ${error instanceof Error ? error.message : String(error)}`;
      options.tally.failures.set(key, (options.tally.failures.get(key) ?? 0) + 1);
      continue;
    }
    options.tally.requests[request.kind] += 1;
    options.tally.completionTokens += outcome.completionTokens;
    if (outcome.aborted) options.tally.aborted += 1;
    if (outcome.status !== 200 || outcome.errorCode !== undefined) {
      const key = `${request.kind} ${outcome.status} ${outcome.errorCode ?? ""}`.trimEnd();
      options.tally.failures.set(key, (options.tally.failures.get(key) ?? 0) + 1);
    }
  }
}
