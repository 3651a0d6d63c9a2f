/**
 * A non-streamed `chat.completion` as the one chunk that says the same: each choice's `message`
 * as its `delta`, its tool calls numbered by position, the usage beside. `choices` may be one
 * choice rather than a list of them, as the chunk mapper reads a chunk's. Anything else (an error
 * object, say) is left as it is for the chunk mapper to read.
 */
export function convertCompletionToChunk(completion: unknown): unknown {
  if (!hasChoices(completion)) return completion;
  const { choices } = completion;
  return {
    ...completion,
    choices: (Array.isArray(choices) ? choices : [choices]).map((choice: unknown) => {
      if (typeof choice !== "object" || choice === null) return choice;
      const { message, ...rest } = choice as { message?: unknown; delta?: unknown };
      // A choice that has a delta, even null, is a chunk's already (servers that call chunks
      // completions; its `message` may repeat the text the deltas said).
      if (typeof message !== "object" || message === null || "delta" in rest) return rest;
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

/** Whether `value` has `choices`: a list of them, or one choice (an object) on its own. */
export function hasChoices(value: unknown): value is { choices: object } {
  if (typeof value !== "object" || value === null) return false;
  const { choices } = value as { choices?: unknown };
  return typeof choices === "object" && choices !== null;
}
