import type { Usage } from "../engine.ts";

/**
 * The most tokens one request can have used upstream, which its usage is taken at when an
 * upstream reports more (a broken or lying one: a fuzzed upstream reporting 1e300 completion
 * tokens for `max_tokens: 5` drained the whole account, charged as far as the balance paid).
 * `promptTokens`: the model's context length, or a few times the prompt's bytes where it has
 * none. `completionTokens`: what the completion was bounded to. Where that bound went upstream
 * (`completionSent`: `max_tokens`, the client's or the reserved one), no more, besides reasoning
 * (some upstreams generate it beyond the bound): an upstream that generated past it ignored it,
 * and the client is charged no more than the maximum cost it was told of (an upstream that
 * streamed 67 MB for `max_tokens: 10` was charged 2.24 against a reservation of 0.0000048, as far
 * as the balance paid). Where it did not (what the context leaves after the estimated prompt,
 * which an upstream counting fewer prompt tokens may pass), the text that came is believed
 * beyond it (at most its UTF-8 bytes).
 */
export interface UsageBounds {
  promptTokens: number;
  completionTokens: number;
  completionSent: boolean;
}

/** Tokens an answer may end with that no text shows (end of turn, end of text). */
const END_TOKENS = 16;

/**
 * `usage` within `bounds`, marked estimated where it was cut, and the upstream's own counts that
 * were past them (`beyond`, for the log). `produced.bytes`: the UTF-8 bytes of the text, refusals,
 * reasoning and tool calls that came, which no bound hides where none went upstream: a token at
 * most a byte, and a few for the end. (Three tokens a character was the bound before: ASCII text
 * that a lying upstream counted high was charged three times over.) Where `max_tokens` went
 * upstream, it bounds all but the reasoning (`produced.reasoningBytes`), which some upstreams
 * generate beyond it (DeepSeek's reasoner bounds only the answer after it).
 */
export function boundUsage(
  usage: Usage,
  bounds: UsageBounds,
  produced: { bytes: number; reasoningBytes: number },
): { usage: Usage; beyond?: { promptTokens?: number; completionTokens?: number } } {
  const completionBound = bounds.completionSent
    ? bounds.completionTokens + produced.reasoningBytes
    : Math.max(bounds.completionTokens, produced.bytes + END_TOKENS);
  const prompt = usage.promptTokens !== undefined && usage.promptTokens > bounds.promptTokens;
  const completion = usage.completionTokens !== undefined && usage.completionTokens > completionBound;
  if (!prompt && !completion) return { usage };
  return {
    usage: {
      promptTokens: prompt ? bounds.promptTokens : usage.promptTokens,
      completionTokens: completion ? completionBound : usage.completionTokens,
      estimated: true,
    },
    beyond: {
      ...(prompt ? { promptTokens: usage.promptTokens } : {}),
      ...(completion ? { completionTokens: usage.completionTokens } : {}),
    },
  };
}
