import { AppError } from "../errors/app-error.ts";

/**
 * `context_length_exceeded`, with the tokens the request asked for (prompt plus requested
 * completion): a key's token rate is checked against them before this error is given (SPEC
 * section 11 puts rate limits first).
 */
export class ContextLengthError extends AppError {
  readonly requestedTokens: number;

  constructor(message: string, requestedTokens: number) {
    super("context_length_exceeded", message, { param: "messages" });
    this.requestedTokens = requestedTokens;
  }
}

/**
 * Throws {@link ContextLengthError} when a prompt plus the requested completion does not fit the
 * context, or the prompt alone fills it (nothing could be generated), with OpenAI's wording.
 * `alsoCounted` names what the prompt's count holds besides the messages (`the tools' ...`), so
 * that a client whose messages are short learns what to shorten.
 */
export function checkContextLength(options: {
  contextLength: number;
  promptTokens: number;
  maxTokens: number | undefined;
  alsoCounted?: string | undefined;
}): void {
  if (fitsContext(options)) return;
  const { contextLength, promptTokens, maxTokens, alsoCounted } = options;
  const counted = alsoCounted === undefined ? "" : ` (${alsoCounted} count as part of them)`;
  if (maxTokens === undefined) {
    // A prompt that fills the context exactly fits it but leaves no token to generate: said, or
    // "2048 tokens. However, ... 2048 tokens" reads as a prompt that fits.
    const noRoom = promptTokens === contextLength ? ", which leaves no room for the completion" : "";
    throw new ContextLengthError(
      `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in ${promptTokens} tokens${counted}${noRoom}. Please reduce the length of the messages.`,
      promptTokens,
    );
  }
  const requested = promptTokens + maxTokens;
  throw new ContextLengthError(
    `This model's maximum context length is ${contextLength} tokens. However, you requested ${requested} tokens (${promptTokens} in the messages${counted}, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    requested,
  );
}

/**
 * Whether a prompt leaves room for at least one completion token and for `maxTokens` where it is
 * set: what {@link checkContextLength} takes.
 */
export function fitsContext(options: {
  contextLength: number;
  promptTokens: number;
  maxTokens: number | undefined;
}): boolean {
  const { contextLength, promptTokens, maxTokens } = options;
  return (
    promptTokens < contextLength && (maxTokens === undefined || promptTokens + maxTokens <= contextLength)
  );
}

/** What of the tools a prompt counts, where it documents them (for `alsoCounted`). */
export const TOOL_TEXTS_COUNTED = "the tools' names, descriptions and parameter schemas";

/**
 * What an upstream request's prompt count holds besides its messages, for
 * {@link checkContextLength}: its tools and its response format's schema, which the upstream
 * server puts in the prompt.
 */
export function describeAlsoCounted(request: {
  tools: readonly unknown[];
  responseFormat: { type: string };
}): string | undefined {
  const parts = [
    ...(request.tools.length > 0 ? [TOOL_TEXTS_COUNTED] : []),
    ...(request.responseFormat.type === "json_schema" ? ["the response format's schema"] : []),
  ];
  return parts.length === 0 ? undefined : parts.join(" and ");
}
