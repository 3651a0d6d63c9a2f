import type { FinishReason, StreamPart, Usage } from "../engine.ts";
import type { LlamaChatResult } from "./create-part-mapper.ts";
import type { GenerationPlan } from "./plan-generation.ts";

/**
 * The `finish` part of a generation that ended: node-llama-cpp's stop reason kept as the raw
 * reason, mapped to the unified one. A forced tool call that ends naturally finishes with
 * `tool_calls`, as a named tool choice and `required` always do.
 */
export function mapFinish(options: {
  plan: GenerationPlan;
  result: Pick<LlamaChatResult, "metadata" | "functionCalls">;
  usage: Usage;
}): StreamPart {
  const { plan, result } = options;
  const rawReason = result.metadata.stopReason;
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
      reason = forcedCall || (result.functionCalls?.length ?? 0) > 0 ? "tool_calls" : "stop";
      break;
    default: {
      const unreachable: never = rawReason;
      throw new Error(`unknown stop reason ${String(unreachable)}`);
    }
  }
  return { type: "finish", reason, rawReason, usage: options.usage };
}
