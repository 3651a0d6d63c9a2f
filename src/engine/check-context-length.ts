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
 */
export function checkContextLength(options: {
  contextLength: number;
  promptTokens: number;
  maxTokens: number | undefined;
}): void {
  const { contextLength, promptTokens, maxTokens } = options;
  if (maxTokens === undefined) {
    if (promptTokens < contextLength) return;
    throw new ContextLengthError(
      `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in ${promptTokens} tokens. Please reduce the length of the messages.`,
      promptTokens,
    );
  }
  const requested = promptTokens + maxTokens;
  if (requested <= contextLength && promptTokens < contextLength) return;
  throw new ContextLengthError(
    `This model's maximum context length is ${contextLength} tokens. However, you requested ${requested} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    requested,
  );
}
