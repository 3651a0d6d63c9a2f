import type { CatalogModel } from "../../../src/catalog/catalog.ts";
import type { ChatEngine, ChatRequest, StreamPart } from "../../../src/engine/engine.ts";
import {
  createOpenAiEngine,
  type OpenAiEngineOptions,
} from "../../../src/engine/openai/create-openai-engine.ts";
import type { UpstreamSettings } from "../../../src/engine/openai/upstream-settings.ts";
import { createChatRequest } from "../../support/create-chat-request.ts";
import { type MockHandler, type MockUpstream, startMockUpstream } from "./mock-upstream.ts";

/** A catalogue model routed to `baseUrls` (one endpoint each). */
export function upstreamModel(
  baseUrls: readonly string[],
  options: {
    id?: string;
    upstreamModel?: string;
    fallbacks?: string[];
    contextLength?: number;
    apiKey?: string;
  } = {},
): CatalogModel {
  return {
    id: options.id ?? "remote",
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: options.contextLength,
    created: 1_700_000_000,
    engine: {
      type: "openai",
      endpoints: baseUrls.map((baseUrl) => ({
        baseUrl,
        apiKey: options.apiKey ?? "sk-upstream-secret-123456",
      })),
      model: options.upstreamModel ?? "upstream-model",
      fallbacks: options.fallbacks ?? [],
    },
  };
}

/** Fast retries and short timeouts, so failure tests take milliseconds. */
export const fastSettings: Partial<UpstreamSettings> = {
  retryBaseDelayMs: 5,
  retryMaxDelayMs: 20,
  firstByteTimeoutMs: 2_000,
  idleTimeoutMs: 2_000,
  connectTimeoutMs: 2_000,
};

const engines: ChatEngine[] = [];

/** An engine for the test; closed by {@link closeEngines}. */
export function createTestEngine(
  options: Omit<OpenAiEngineOptions, "settings"> & { settings?: Partial<UpstreamSettings> },
): ChatEngine {
  const engine = createOpenAiEngine({ ...options, settings: { ...fastSettings, ...options.settings } });
  engines.push(engine);
  return engine;
}

export async function closeEngines(): Promise<void> {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
}

const mocks: MockUpstream[] = [];

/** A mock upstream for the test; closed by {@link closeEnginesAndMocks}. */
export async function startTestMock(handler?: MockHandler): Promise<MockUpstream> {
  const upstream = await startMockUpstream(handler);
  mocks.push(upstream);
  return upstream;
}

/** Closes the engines and the mock upstreams the test made (an `afterEach`). */
export async function closeEnginesAndMocks(): Promise<void> {
  await closeEngines();
  await Promise.all(mocks.splice(0).map((upstream) => upstream.close()));
}

/** A plain request with a system and a user message; override what a test is about. */
export function chatRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return createChatRequest({
    messages: [
      { role: "system", content: "You are a test." },
      { role: "user", content: "Say hello." },
    ],
    ...overrides,
  });
}

/** Runs a request to its end and returns every part. */
export async function collectParts(
  engine: ChatEngine,
  request: ChatRequest = chatRequest(),
  signal: AbortSignal = new AbortController().signal,
): Promise<StreamPart[]> {
  const prepared = await engine.prepare(request);
  const parts: StreamPart[] = [];
  for await (const batch of prepared.run(signal)) parts.push(...batch);
  return parts;
}

/** The error thrown by the first `next()` of a run. */
export async function firstError(engine: ChatEngine, request: ChatRequest = chatRequest()): Promise<unknown> {
  try {
    await collectParts(engine, request);
  } catch (error) {
    return error;
  }
  throw new Error("the run did not throw");
}

export function textOf(parts: readonly StreamPart[]): string {
  return parts.map((part) => (part.type === "text-delta" ? part.text : "")).join("");
}
