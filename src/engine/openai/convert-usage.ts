import type { Usage } from "../engine.ts";

/**
 * The most tokens an upstream's count is taken at: a thousand times the longest contexts served
 * today. A larger count is a broken upstream, not a request; taken as is, it would price the
 * request beyond any amount a store holds and, summed over a ledger, overflow the totals. It is
 * read as this bound and the usage marked estimated.
 */
export const MAX_REPORTED_TOKENS = 1_000_000_000;

/**
 * Reads an upstream's `usage` object. A count that is missing, null or not a non-negative whole
 * number stays `undefined` (never 0), so the caller can fill it with an estimate; a count above
 * {@link MAX_REPORTED_TOKENS} is read as that bound, and the usage is then `estimated`.
 * `undefined` when the value carries no count at all.
 */
export function convertUsage(value: unknown): Usage | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const promptTokens = readCount(usage.prompt_tokens);
  const completionTokens = readCount(usage.completion_tokens);
  if (promptTokens === undefined && completionTokens === undefined) return undefined;
  if ((promptTokens ?? 0) > MAX_REPORTED_TOKENS || (completionTokens ?? 0) > MAX_REPORTED_TOKENS) {
    return {
      promptTokens: promptTokens === undefined ? undefined : Math.min(promptTokens, MAX_REPORTED_TOKENS),
      completionTokens:
        completionTokens === undefined ? undefined : Math.min(completionTokens, MAX_REPORTED_TOKENS),
      estimated: true,
    };
  }
  return { promptTokens, completionTokens };
}

function readCount(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/**
 * An upstream's usage so far, after another report: field by field, a count the later report
 * gives replaces the earlier one, and one it leaves out keeps it (an upstream may send the prompt
 * count first and the completion count alone at the end). A later report with both counts is the
 * whole usage; otherwise a count taken at the bound stays marked `estimated`.
 */
export function mergeUsage(earlier: Usage | undefined, later: Usage): Usage {
  if (earlier === undefined || (later.promptTokens !== undefined && later.completionTokens !== undefined))
    return later;
  const merged: Usage = {
    promptTokens: later.promptTokens ?? earlier.promptTokens,
    completionTokens: later.completionTokens ?? earlier.completionTokens,
  };
  if (earlier.estimated === true || later.estimated === true) merged.estimated = true;
  return merged;
}
