import { createErrorMark } from "../errors/error-mark.ts";

/** Tokens an engine generated for runs that failed before their first part, by error. */
const generated = createErrorMark<number>();

/**
 * Marks `error`, thrown from a run's first `next()`, with the tokens its attempts generated
 * before they failed without a part the client could be given (an upstream that streamed its
 * reasoning and then broke): its usage row records them, uncharged, as a row records the text
 * of an answer that failed once it had begun.
 */
export function withGeneratedTokens<Failure extends object>(error: Failure, tokens: number): Failure {
  return generated.mark(error, tokens);
}

/** The tokens {@link withGeneratedTokens} marked `error` with, if any. */
export function generatedTokensOf(error: unknown): number | undefined {
  return generated.of(error);
}
