/**
 * A non-streamed `chat.completion` as the one chunk that says the same: each choice's `message`
 * as its `delta`, its tool calls numbered by position, the usage beside. Anything else (an error
 * object, say) is left as it is for the chunk mapper to read.
 */
export function convertCompletionToChunk(completion: unknown): unknown {
  if (typeof completion !== "object" || completion === null) return completion;
  const { choices } = completion as { choices?: unknown };
  if (!Array.isArray(choices)) return completion;
  return {
    ...completion,
    choices: choices.map((choice: unknown) => {
      if (typeof choice !== "object" || choice === null) return choice;
      const { message, ...rest } = choice as { message?: unknown };
      if (typeof message !== "object" || message === null) return rest;
      const { tool_calls: calls } = message as { tool_calls?: unknown };
      return {
        ...rest,
        delta: {
          ...message,
          tool_calls: Array.isArray(calls)
            ? calls.map((call: unknown, index) =>
                typeof call === "object" && call !== null ? { ...call, index } : call,
              )
            : calls,
        },
      };
    }),
  };
}
