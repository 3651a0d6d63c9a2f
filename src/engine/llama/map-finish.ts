import type { FinishReason, StreamPart, Usage } from "../engine.ts";
import type { LlamaChatResult } from "./create-part-mapper.ts";
import type { GenerationPlan } from "./plan-generation.ts";

/** Why a generation ended, in node-llama-cpp's words (LlamaChat's, which the direct path reuses). */
export type LlamaStopReason = LlamaChatResult["metadata"]["stopReason"];

/**
 * The `finish` part of a generation that ended, on either path: node-llama-cpp's stop reason kept
 * as the raw reason, mapped to the unified one. A forced tool call that ends naturally finishes
 * with `tool_calls`, as a named tool choice and `required` always do, and so does a generation that
 * called functions.
 */
export function mapStopReason(options: {
  plan: GenerationPlan;
  stopReason: LlamaStopReason;
  /** Whether the generation called functions (`functions` and `call-or-json` plans may). */
  calledFunctions: boolean;
  usage: Usage;
}): StreamPart {
  const { plan, stopReason: rawReason } = options;
  const forcedCall = plan.kind === "tool-arguments" || plan.kind === "tool-envelope";
  let reason: FinishReason;
  switch (rawReason) {
    case "maxTokens":
      reason = "length";
      break;
    case "functionCalls":
      reason = "tool_calls";
      break;
    case "abort":
      reason = "stop";
      break;
    case "eogToken":
    case "stopGenerationTrigger":
    case "customStopTrigger":
      reason = forcedCall || options.calledFunctions ? "tool_calls" : "stop";
      break;
    default: {
      const unreachable: never = rawReason;
      throw new Error(`unknown stop reason ${String(unreachable)}`);
    }
  }
  return { type: "finish", reason, rawReason, usage: options.usage };
}
