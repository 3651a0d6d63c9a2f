import { Agent, request } from "node:http";

/** What one chat completion request did, as the client saw it. */
export interface ChatOutcome {
  status: number;
  /** `usage.completion_tokens` (streams ask for `include_usage`); 0 when the response had none. */
  completionTokens: number;
  /** `usage.prompt_tokens`; 0 when the response had none. */
  promptTokens: number;
  /** Milliseconds from sending the request to the first non-empty content (or tool-call) delta. */
  firstContentMilliseconds: number | undefined;
  totalMilliseconds: number;
  /** Content chunks received (streams). */
  chunks: number;
  /** The client cut the stream (`abortAfterChunks`). */
  aborted: boolean;
  /** The error code of an error response or of an error event inside a stream. */
  errorCode: string | undefined;
}

/** Options of {@link postChatCompletion}. */
export interface ChatRequestOptions {
  /** `http://host:port/v1` */
  baseUrl: string;
  key: string;
  agent: Agent;
  /** The request body; `stream: true` is read as SSE (and gets `stream_options.include_usage`). */
  body: Record<string, unknown>;
  /** Closes the connection after this many content chunks (a client that goes away). */
  abortAfterChunks?: number;
}

/** A keep-alive agent for one benchmark client population. */
export function createClientAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
}

interface StreamChunk {
  choices?: { delta?: { content?: string; tool_calls?: unknown[] } }[];
  usage?: { completion_tokens?: number; prompt_tokens?: number } | null;
  error?: { code?: string };
}

/**
 * Posts one chat completion over plain `node:http` (the lightest client Node has, so the client
 * costs the shared event loop as little as possible) and measures it.
 */
export function postChatCompletion(options: ChatRequestOptions): Promise<ChatOutcome> {
  const stream = options.body.stream === true;
  const body = JSON.stringify(
    stream ? { ...options.body, stream_options: { include_usage: true } } : options.body,
  );
  const url = new URL(`${options.baseUrl}/chat/completions`);
  const startedAt = performance.now();
  return new Promise((resolve, reject) => {
    const outcome: ChatOutcome = {
      status: 0,
      completionTokens: 0,
      promptTokens: 0,
      firstContentMilliseconds: undefined,
      totalMilliseconds: 0,
      chunks: 0,
      aborted: false,
      errorCode: undefined,
    };
    const finish = () => {
      outcome.totalMilliseconds = performance.now() - startedAt;
      resolve(outcome);
    };
    const outgoing = request(
      url,
      {
        method: "POST",
        agent: options.agent,
        headers: {
          authorization: `Bearer ${options.key}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      (response) => {
        outcome.status = response.statusCode ?? 0;
        response.setEncoding("utf8");
        let text = "";
        if (!stream || outcome.status !== 200) {
          response.on("data", (data: string) => {
            text += data;
          });
          response.on("end", () => {
            readCompletion(text, outcome, startedAt);
            finish();
          });
          response.on("error", reject);
          return;
        }
        let done = false;
        response.on("data", (data: string) => {
          text += data;
          for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n")) {
            const event = text.slice(0, end);
            text = text.slice(end + 2);
            if (!event.startsWith("data: ")) continue;
            const payload = event.slice(6);
            if (payload === "[DONE]") {
              done = true;
              continue;
            }
            const chunk = JSON.parse(payload) as StreamChunk;
            if (chunk.error !== undefined) outcome.errorCode = chunk.error.code ?? "unknown";
            if (chunk.usage != null) {
              outcome.completionTokens = chunk.usage.completion_tokens ?? 0;
              outcome.promptTokens = chunk.usage.prompt_tokens ?? 0;
            }
            const delta = chunk.choices?.[0]?.delta;
            if (delta === undefined) continue;
            if ((delta.content !== undefined && delta.content !== "") || delta.tool_calls !== undefined) {
              outcome.firstContentMilliseconds ??= performance.now() - startedAt;
              outcome.chunks += 1;
              if (options.abortAfterChunks !== undefined && outcome.chunks >= options.abortAfterChunks) {
                outcome.aborted = true;
                // Destroying the socket is what a client that goes away does; the server stops.
                response.destroy();
                outgoing.destroy();
                finish();
                return;
              }
            }
          }
        });
        response.on("end", () => {
          if (outcome.aborted) return;
          if (!done && outcome.errorCode === undefined) outcome.errorCode = "stream_ended_early";
          finish();
        });
        response.on("error", (error) => {
          if (outcome.aborted) return;
          reject(error);
        });
      },
    );
    outgoing.on("error", (error) => {
      if (outcome.aborted) return;
      reject(error);
    });
    outgoing.end(body);
  });
}

function readCompletion(text: string, outcome: ChatOutcome, startedAt: number): void {
  try {
    const parsed = JSON.parse(text) as {
      usage?: { completion_tokens?: number; prompt_tokens?: number };
      error?: { code?: string };
    };
    if (parsed.error !== undefined) outcome.errorCode = parsed.error.code ?? "unknown";
    outcome.completionTokens = parsed.usage?.completion_tokens ?? 0;
    outcome.promptTokens = parsed.usage?.prompt_tokens ?? 0;
    if (outcome.status === 200) outcome.firstContentMilliseconds = performance.now() - startedAt;
  } catch {
    outcome.errorCode = `unparsable_${outcome.status}`;
  }
}
