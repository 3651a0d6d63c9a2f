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
 * beyond it (at most its UTF-8 bytes). Never more than `contextTokens`, the model's context
 * length where it is known (an answer with a catalogue `context_length` and no `max_tokens` was
 * charged 100,016 tokens for a context of 1000), else than the bound sent and
 * {@link REASONING_ALLOWANCE_TOKENS} of reasoning.
 */
export interface UsageBounds {
  promptTokens: number;
  completionTokens: number;
  completionSent: boolean;
  contextTokens?: number | undefined;
}

/**
 * What an answer has produced so far: its UTF-8 bytes, and those of its reasoning among them (the
 * chunk mapper keeps both).
 */
export interface ProducedBytes {
  readonly producedBytes: number;
  readonly reasoningBytes: number;
  /**
   * The reasoning tokens the upstream counted (`reasoning_tokens`), where it counted some: the
   * reasoning allowed beyond `max_tokens` is no more than that (its streamed bytes bound it from
   * above; an upstream that counted 20 reasoning tokens for 100 bytes and 85 more had an answer
   * of 85 tokens for `max_tokens: 10`, charged 105).
   */
  readonly reportedReasoningTokens?: number | undefined;
}

/** Tokens an answer may end with that no text shows (end of turn, end of text). */
const END_TOKENS = 16;

/**
 * Reasoning counted beyond a `max_tokens` sent upstream where the model's context length is not
 * known: DeepSeek's reasoner bounded its chain of thought at 32K tokens apart from `max_tokens`.
 * A reasoning flood beyond it was charged a token a byte, as far as the balance paid.
 */
export const REASONING_ALLOWANCE_TOKENS = 32_768;

/**
 * The most UTF-8 bytes one token spells in the vocabularies upstreams use (their longest tokens
 * are runs of spaces or symbols, well under this): an answer with more bytes than this many per
 * token of a bound holds more tokens than that in any of them.
 */
const MAX_TOKEN_BYTES = 128;
/** Room beyond that for what no token spells (an end, markers). */
const PAST_BOUND_SLACK_BYTES = 1024;

/** The most tokens the answer may hold in all, reasoning included, where that is known. */
function answerTokensAtMost(bounds: UsageBounds): number | undefined {
  if (bounds.contextTokens !== undefined) return bounds.contextTokens;
  return bounds.completionSent ? bounds.completionTokens + REASONING_ALLOWANCE_TOKENS : undefined;
}

/**
 * The most completion tokens an answer that produced `produced` is charged (see
 * {@link UsageBounds}): where `max_tokens` went upstream, it and the reasoning's bytes (some
 * upstreams generate reasoning beyond it, DeepSeek's reasoner); else the bound or the bytes that
 * came, a token at most a byte, and a few for the end (three tokens a character was the bound
 * before: ASCII text that a lying upstream counted high was charged three times over). Either
 * within what the answer may hold in all.
 */
export function completionTokensAtMost(bounds: UsageBounds, produced: ProducedBytes): number {
  const reported = produced.reportedReasoningTokens;
  const reasoning =
    reported !== undefined && reported > 0
      ? Math.min(produced.reasoningBytes, reported)
      : produced.reasoningBytes;
  const bound = bounds.completionSent
    ? bounds.completionTokens + reasoning
    : Math.max(bounds.completionTokens, produced.producedBytes + END_TOKENS);
  const inAll = answerTokensAtMost(bounds);
  return inAll === undefined ? bound : Math.min(bound, inAll);
}

/**
 * Whether an answer has surely gone past its bounds: more bytes besides reasoning than the
 * `max_tokens` sent upstream can spell in any vocabulary, or more in all than the answer may hold
 * (see {@link completionTokensAtMost}). It is ended there, as one that honoured them ends.
 */
export function isPastBounds(bounds: UsageBounds, produced: ProducedBytes): boolean {
  if (
    bounds.completionSent &&
    produced.producedBytes - produced.reasoningBytes > spelledAtMost(bounds.completionTokens)
  )
    return true;
  const inAll = answerTokensAtMost(bounds);
  return inAll !== undefined && produced.producedBytes > spelledAtMost(inAll);
}

function spelledAtMost(tokens: number): number {
  return tokens * MAX_TOKEN_BYTES + PAST_BOUND_SLACK_BYTES;
}

/**
 * `usage` within `bounds`, marked estimated where it was cut, and the upstream's own counts that
 * were past them (`beyond`, for the log).
 */
export function boundUsage(
  usage: Usage,
  bounds: UsageBounds,
  produced: ProducedBytes,
): { usage: Usage; beyond?: { promptTokens?: number; completionTokens?: number } } {
  const completionBound = completionTokensAtMost(bounds, produced);
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
