/**
 * A non-streamed `chat.completion` as the one chunk that says the same: each choice's `message`
 * as its `delta`, its tool calls numbered by position, the usage beside. `choices` may be one
 * choice rather than a list of them, as the chunk mapper reads a chunk's. Anything else (an error
 * object, say) is left as it is for the chunk mapper to read.
 *
 * `said`: chunks before it said the answer already (a stream that ends with the whole answer
 * again): a choice's message then gives only what they did not, its tool calls where none came
 * (`calledTools` false), and not its log probabilities; its finish reason and the usage stand.
 */
export function convertCompletionToChunk(completion: unknown, said?: { calledTools: boolean }): unknown {
  if (!hasChoices(completion)) return completion;
  const { choices } = completion;
  return {
    ...completion,
    choices: (Array.isArray(choices) ? choices : [choices]).map((choice: unknown) => {
      if (typeof choice !== "object" || choice === null) return choice;
      const { message, ...rest } = choice as { message?: unknown; delta?: unknown; logprobs?: unknown };
      // A choice that has a delta is a chunk's already (servers that call chunks completions).
      if (typeof message !== "object" || message === null || rest.delta != null) return rest;
      const { tool_calls: calls } = message as { tool_calls?: unknown };
      const numbered = Array.isArray(calls)
        ? calls.map((call: unknown, index) =>
            typeof call === "object" && call !== null ? { ...call, index } : call,
          )
        : calls;
      if (said === undefined) return { ...rest, delta: { ...message, tool_calls: numbered } };
      const { logprobs: _said, ...unsaid } = rest;
      return { ...unsaid, delta: said.calledTools || numbered == null ? {} : { tool_calls: numbered } };
    }),
  };
}

/** Whether `value` has `choices`: a list of them, or one choice (an object) on its own. */
export function hasChoices(value: unknown): value is { choices: object } {
  if (typeof value !== "object" || value === null) return false;
  const { choices } = value as { choices?: unknown };
  return typeof choices === "object" && choices !== null;
}
