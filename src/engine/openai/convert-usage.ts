import type { Usage } from "../engine.ts";

/**
 * Reads an upstream's `usage` object. A count that is missing, null or not a non-negative whole
 * number stays `undefined` (never 0), so the caller can fill it with an estimate; `undefined`
 * when the value carries no count at all.
 */
export function convertUsage(value: unknown): Usage | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const promptTokens = readCount(usage.prompt_tokens);
  const completionTokens = readCount(usage.completion_tokens);
  if (promptTokens === undefined && completionTokens === undefined) return undefined;
  return { promptTokens, completionTokens };
}

function readCount(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}
