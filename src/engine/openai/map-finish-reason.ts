import type { FinishReason } from "../engine.ts";

/**
 * Maps an upstream's `finish_reason` to the unified one (the raw value is kept beside it by the
 * caller). OpenAI's values map to themselves, the legacy `function_call` to `tool_calls`, and the
 * values some compatible servers send (`eos`, `eos_token`, `end_turn`, `max_tokens`, `tool_use`)
 * to theirs; the reasons that mean tool calls only when a call came.
 * A response that called tools finishes with `tool_calls` even where the upstream says `stop`
 * (OpenAI does for a named `tool_choice`), says nothing, or says something unknown: Tollgate always
 * does (SPEC §11).
 */
export function mapFinishReason(raw: string | undefined, options: { calledTools: boolean }): FinishReason {
  switch (raw) {
    case "stop":
    case "eos":
    case "eos_token":
    case "end_turn":
    case "stop_sequence":
      return options.calledTools ? "tool_calls" : "stop";
    case "length":
    case "max_tokens":
    case "model_length":
      return "length";
    case "tool_calls":
    case "function_call":
    case "tool_use":
      // Said without a call Tollgate could read (a legacy `function_call` delta): a client told
      // `tool_calls` would look for calls that are not there.
      return options.calledTools ? "tool_calls" : "stop";
    case "content_filter":
      return "content_filter";
    default:
      // No reason, or one without a unified meaning: a response that called tools still asks
      // the client to run them, which only `tool_calls` tells it.
      return options.calledTools ? "tool_calls" : "other";
  }
}

/**
 * Whether a finish reason says the upstream gave up mid-answer rather than finishing it: vLLM's
 * `abort` (the server dropped the request), OpenRouter's `error` (the provider behind it failed)
 * and DeepSeek's `insufficient_system_resource` (cut for want of capacity). Mapped as any other
 * unknown value, the client would get `stop` for a cut answer, and be charged for it.
 */
export function isFailureFinishReason(raw: string | undefined): boolean {
  return raw === "abort" || raw === "error" || raw === "insufficient_system_resource";
}
