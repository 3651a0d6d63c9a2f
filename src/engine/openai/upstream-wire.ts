/**
 * The OpenAI chat-completions wire format as Tollgate sends it upstream and reads it back. Only
 * what the engine uses is typed; everything read from an upstream is checked before use, since
 * "OpenAI-compatible" servers differ in what they leave out.
 */

/** A message's content: its text, or the text parts the client sent. */
export type UpstreamContent = string | { type: "text"; text: string }[];

export type UpstreamMessage =
  | { role: "system"; content: UpstreamContent; name?: string }
  | { role: "user"; content: UpstreamContent; name?: string }
  | {
      role: "assistant";
      content: UpstreamContent | null;
      name?: string;
      tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
    }
  | { role: "tool"; content: UpstreamContent; tool_call_id: string };

export interface UpstreamTool {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type UpstreamToolChoice =
  | "none"
  | "auto"
  | "required"
  | { type: "function"; function: { name: string } };

export type UpstreamResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      json_schema: { name: string; description?: string; schema: Record<string, unknown>; strict?: boolean };
    };

/**
 * The body of `POST {base_url}/chat/completions`. Always streamed, with usage asked for except
 * from endpoints that refuse `stream_options`; the completion bound as `max_tokens`, or as
 * `max_completion_tokens` to endpoints that refuse `max_tokens` (OpenAI's reasoning models).
 * Beside the fields typed here go those of the client's that only the upstream acts on
 * (`logit_bias`, `service_tier`, ...: ChatRequest.upstreamExtras), untyped, as it sent them.
 */
export interface UpstreamRequestBody {
  model: string;
  messages: UpstreamMessage[];
  stream: true;
  stream_options?: { include_usage: true };
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  stop?: string[];
  seed?: number;
  tools?: UpstreamTool[];
  tool_choice?: UpstreamToolChoice;
  parallel_tool_calls?: boolean;
  reasoning_effort?: string;
  response_format?: UpstreamResponseFormat;
  user?: string;
  /** Only when the client asked for log probabilities; `top_logprobs` only as it sent it. */
  logprobs?: true;
  top_logprobs?: number;
}

/** `usage` as upstreams send it; any field may be missing or null. */
export interface UpstreamUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
}

/** One `tool_calls` entry of a streamed delta. */
export interface UpstreamToolCallDelta {
  index?: unknown;
  id?: unknown;
  function?: { name?: unknown; arguments?: unknown } | null;
}

/** One entry of a chunk's `choices`, as far as the engine reads it. */
export interface UpstreamChoice {
  index?: unknown;
  delta?: {
    content?: unknown;
    refusal?: unknown;
    tool_calls?: unknown;
    reasoning_content?: unknown;
    reasoning?: unknown;
  } | null;
  finish_reason?: unknown;
  /** The log probabilities of the delta's tokens (read-logprobs.ts), read only when asked for. */
  logprobs?: unknown;
}

/** One `chat.completion.chunk` event, as far as the engine reads it. */
export interface UpstreamChunk {
  /** Entries are what the upstream sent: not always objects. */
  choices?: unknown;
  usage?: UpstreamUsage | null;
  /** Groq's: its usage in `x_groq.usage` where it sends none at the top (before it took `stream_options`). */
  x_groq?: unknown;
  error?: unknown;
}
