import type { ChatRequest } from "../../src/engine/engine.ts";

/**
 * A plain engine request as the edge makes one from a body that sets nothing (no sampling
 * settings, no limits, no tools, text format) and one user message; override what a test is about.
 */
export function createChatRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    messages: [{ role: "user", content: "Hello there" }],
    maxTokens: undefined,
    temperature: undefined,
    topP: undefined,
    frequencyPenalty: 0,
    presencePenalty: 0,
    stop: [],
    seed: undefined,
    tools: [],
    toolChoice: { type: "auto" },
    responseFormat: { type: "text" },
    ...overrides,
  };
}
