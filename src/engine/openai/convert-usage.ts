import {
  COMPLETION_TOKENS_DETAILS,
  PROMPT_TOKENS_DETAILS,
  type Usage,
  type UsageDetails,
} from "../engine.ts";

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
  const details = readDetails(usage, promptTokens, completionTokens);
  return details === undefined
    ? { promptTokens, completionTokens }
    : { promptTokens, completionTokens, details };
}

/**
 * The breakdowns OpenAI names in `prompt_tokens_details` and `completion_tokens_details`: each a
 * whole number no larger than the count it breaks down (a broken upstream's figures are left
 * out); `undefined` when there are none.
 */
function readDetails(
  usage: Record<string, unknown>,
  promptTokens: number | undefined,
  completionTokens: number | undefined,
): UsageDetails | undefined {
  const prompt = readDetailCounts(usage.prompt_tokens_details, PROMPT_TOKENS_DETAILS, promptTokens);
  const completion = readDetailCounts(
    usage.completion_tokens_details,
    COMPLETION_TOKENS_DETAILS,
    completionTokens,
  );
  return detailsOf(prompt, completion);
}

/** Breakdowns holding those given; `undefined` when neither is. */
function detailsOf(
  prompt: UsageDetails["prompt"],
  completion: UsageDetails["completion"],
): UsageDetails | undefined {
  if (prompt === undefined && completion === undefined) return undefined;
  return { ...(prompt === undefined ? {} : { prompt }), ...(completion === undefined ? {} : { completion }) };
}

function readDetailCounts<Name extends string>(
  value: unknown,
  names: readonly Name[],
  total: number | undefined,
): Partial<Record<Name, number>> | undefined {
  if (typeof value !== "object" || value === null || total === undefined) return undefined;
  const counts: Partial<Record<Name, number>> = {};
  let any = false;
  for (const name of names) {
    const count = readCount((value as Record<string, unknown>)[name]);
    if (count === undefined || count > total) continue;
    counts[name] = count;
    any = true;
  }
  return any ? counts : undefined;
}

/**
 * A whole, non-negative count, of any size (beyond 2^53 too, and JSON's `1e400`, which parses as
 * Infinity): those are the broken counts the bound is for, not counts to estimate afresh, which
 * would charge a larger count less.
 */
function readCount(value: unknown): number | undefined {
  return typeof value === "number" && value >= 0 && (Number.isInteger(value) || value === Infinity)
    ? value
    : undefined;
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
  const details = mergeDetails(earlier.details, later.details);
  if (details !== undefined) merged.details = details;
  if (earlier.estimated === true || later.estimated === true) merged.estimated = true;
  return merged;
}

/** Each breakdown from the later report where it gives one, else the earlier's. */
function mergeDetails(
  earlier: UsageDetails | undefined,
  later: UsageDetails | undefined,
): UsageDetails | undefined {
  if (earlier === undefined || later === undefined) return later ?? earlier;
  return detailsOf(later.prompt ?? earlier.prompt, later.completion ?? earlier.completion);
}
