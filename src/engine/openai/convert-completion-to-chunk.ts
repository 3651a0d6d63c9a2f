/**
 * A non-streamed `chat.completion` as the one chunk that says the same: each choice's `message`
 * as its `delta`, its tool calls numbered by position, the usage beside. `choices` may be one
 * choice rather than a list of them, as the chunk mapper reads a chunk's. Anything else (an error
 * object, say) is left as it is for the chunk mapper to read.
 *
 * `said`: chunks before it said the answer already (a stream that ends with the whole answer
 * again): a choice's message then gives only what they did not: its text past the `content` they
 * said, where it begins with that (all of it after tool calls alone), and its tool calls where
 * none came (`calledTools` false); not its log probabilities. Its finish reason and usage stand.
 * `reasoned`: chunks before it streamed reasoning, which its message's reasoning repeats (counted
 * twice, it was charged twice).
 */
export function convertCompletionToChunk(
  completion: unknown,
  said?: { calledTools: boolean; content: string },
  reasoned = false,
): unknown {
  if (!hasChoices(completion)) return completion;
  const { choices } = completion;
  return {
    ...completion,
    choices: (Array.isArray(choices) ? choices : [choices]).map((choice: unknown) => {
      if (typeof choice !== "object" || choice === null) return choice;
      const { message, ...rest } = choice as { message?: unknown; delta?: unknown; logprobs?: unknown };
      // A choice that has a delta is a chunk's already (servers that call chunks completions),
      // unless the delta says nothing beside a message that does.
      if (typeof message !== "object" || message === null || !isEmpty(rest.delta)) return rest;
      const { tool_calls: calls } = message as { tool_calls?: unknown };
      const numbered = Array.isArray(calls)
        ? calls.map((call: unknown, index) =>
            typeof call === "object" && call !== null ? { ...call, index } : call,
          )
        : calls;
      if (said === undefined) {
        const delta: Record<string, unknown> = { ...message, tool_calls: numbered };
        if (reasoned) for (const field of REASONING_FIELDS) delete delta[field];
        return { ...rest, delta };
      }
      const { logprobs: _said, ...unsaid } = rest;
      const { content } = message as { content?: unknown };
      const delta: Record<string, unknown> = {};
      // What the chunks did not say of the text (a stream cut short that ends with the whole).
      if (
        typeof content === "string" &&
        content.length > said.content.length &&
        content.startsWith(said.content)
      )
        delta.content = content.slice(said.content.length);
      if (!said.calledTools && numbered != null) delta.tool_calls = numbered;
      return { ...unsaid, delta };
    }),
  };
}

/** The fields a message carries its reasoning in (vLLM's and DeepSeek's, Ollama's and OpenRouter's). */
const REASONING_FIELDS = ["reasoning_content", "reasoning"];

/** Whether a delta says nothing: none, null, or `{}`. */
function isEmpty(delta: unknown): boolean {
  return delta == null || (typeof delta === "object" && Object.keys(delta).length === 0);
}

/** Whether `value` has `choices`: a list of them, or one choice (an object) on its own. */
export function hasChoices(value: unknown): value is { choices: object } {
  if (typeof value !== "object" || value === null) return false;
  const { choices } = value as { choices?: unknown };
  return typeof choices === "object" && choices !== null;
}
