import type { ChatRequest } from "../../src/engine/engine.ts";

/**
 * A plain engine request with the API's defaults (temperature 1, no limits, no tools, text
 * format) and one user message; override what a test is about.
 */
export function createChatRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    messages: [{ role: "user", content: "Hello there" }],
    maxTokens: undefined,
    temperature: 1,
    topP: 1,
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
