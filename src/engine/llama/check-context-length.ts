import { AppError } from "../../errors/app-error.ts";

/**
 * Throws `context_length_exceeded` when a prompt plus the requested completion does not fit the
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
    throw new AppError(
      "context_length_exceeded",
      `This model's maximum context length is ${contextLength} tokens. However, your messages resulted in ${promptTokens} tokens. Please reduce the length of the messages.`,
      { param: "messages" },
    );
  }
  const requested = promptTokens + maxTokens;
  if (requested <= contextLength && promptTokens < contextLength) return;
  throw new AppError(
    "context_length_exceeded",
    `This model's maximum context length is ${contextLength} tokens. However, you requested ${requested} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    { param: "messages" },
  );
}
