import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { hideKeySecrets } from "../../admin/read-key-reference.ts";
import type { ChatService } from "../../chat/chat-service.ts";
import type { RequestKey } from "../../chat/request-key.ts";
import { type AppError, isAppError } from "../../errors/app-error.ts";
import { cutText } from "../../errors/cut-text.ts";
import { shownValue } from "../../errors/shown-value.ts";
import { convertChatRequest } from "../convert-chat-request.ts";
import type { InFlightRequests } from "../in-flight-requests.ts";
import { collectCompletion, renderChatCompletion } from "../render-chat-completion.ts";
import { nameModel } from "../request-state.ts";
import {
  type ChatCompletionRequestBody,
  ChatCompletionRequestSchema,
} from "../schemas/chat-completion-request.ts";
import { ChunkRenderer } from "../sse.ts";
import {
  CLIENT_STALL_TIMEOUT_MS,
  closeIfLeftUnread,
  endEventStream,
  writeToClient,
} from "../write-event-stream.ts";

/**
 * Aborts when the connection closes before the response is complete, and then calls `onClosed`
 * once the handler's work is over (`handled`: the engine stopped and the request is settled),
 * saying whether the client left (or the server closed it after cutting the request itself: a
 * shutdown closes the connections of requests still settling).
 */
function abortOnDisconnect(
  reply: FastifyReply,
  inFlight: InFlightRequests,
  handled: Promise<void>,
  onClosed: (clientLeft: boolean) => void,
): AbortController {
  const controller = new AbortController();
  // Until its work is over, not its connection: a shutdown waits for the settlement of a request
  // whose connection it closed before it closes the store.
  void handled.then(inFlight.track(controller));
  reply.raw.on("close", () => {
    if (reply.raw.writableFinished) return;
    const clientLeft = cutBy(controller.signal) === undefined;
    controller.abort();
    void handled.then(() => onClosed(clientLeft));
  });
  return controller;
}

/** Longest prompt text a log line carries (`log_prompts: true`); the rest is cut. */
export const MAX_LOGGED_PROMPT_CHARS = 64 * 1024;

/**
 * The model as the client named it, for its log line: the secret of a key pasted there is hidden
 * (keys are never logged: SPEC section 6; the 404 hides it too), a long name cut as an error
 * message would repeat it.
 */
function describeModel(model: string): string {
  const shown = model.includes("sk-tg-") ? hideKeySecrets(model) : model;
  return shownValue(shown);
}

/** The messages as JSON text for the request's log line, cut at {@link MAX_LOGGED_PROMPT_CHARS}. */
function describePrompt(messages: unknown): Record<string, string | number> {
  const text = hideKeySecrets(JSON.stringify(messages));
  if (text.length <= MAX_LOGGED_PROMPT_CHARS) return { prompt: text };
  return { prompt: cutText(text, MAX_LOGGED_PROMPT_CHARS), promptChars: text.length };
}

/** The error that cut a request (a shutdown), if any; a client disconnect has none. */
function cutBy(signal: AbortSignal): AppError | undefined {
  return signal.aborted && isAppError(signal.reason) ? signal.reason : undefined;
}

/** The route of chat completions. */
export const CHAT_COMPLETIONS_PATH = "/v1/chat/completions";

/** `POST /v1/chat/completions`: validate, hand to the chat service, render JSON or SSE. */
export function registerChatCompletionRoutes(
  app: FastifyInstance,
  options: {
    chat: ChatService;
    getKey: (request: object) => RequestKey;
    inFlight: InFlightRequests;
    annotate: (request: object, fields: Record<string, string | number | boolean | undefined>) => void;
    /** Put each request's messages in its log line (`log_prompts: true`); default: never. */
    logPrompts?: boolean;
    /**
     * Logs and counts a request whose connection closed before its response was complete: its
     * client left, or the server closed it after cutting the request (then as what was sent).
     */
    recordClosed: (request: FastifyRequest, reply: FastifyReply, clientLeft: boolean) => void;
    /**
     * Tells the server that this request's early close is recorded here ({@link recordClosed},
     * once settled), not when its connection closes.
     */
    recordsOwnClose: (request: FastifyRequest) => void;
    /** How long a client may leave its answer unread; default {@link CLIENT_STALL_TIMEOUT_MS}. */
    clientStallTimeoutMs?: number | undefined;
  },
): void {
  const stallTimeoutMs = options.clientStallTimeoutMs ?? CLIENT_STALL_TIMEOUT_MS;
  app.post<{ Body: ChatCompletionRequestBody }>(
    CHAT_COMPLETIONS_PATH,
    { schema: { body: ChatCompletionRequestSchema } },
    async (request, reply) => {
      const handled = Promise.withResolvers<void>();
      try {
        return await handleChat(request, reply, handled.promise);
      } finally {
        handled.resolve();
      }
    },
  );

  async function handleChat(
    request: FastifyRequest<{ Body: ChatCompletionRequestBody }>,
    reply: FastifyReply,
    handled: Promise<void>,
  ) {
    const chatOptions = convertChatRequest(request.body);
    options.annotate(request, { model: describeModel(chatOptions.model), stream: chatOptions.stream });
    nameModel(request, chatOptions.model);
    if (options.logPrompts === true) options.annotate(request, describePrompt(request.body.messages));
    options.recordsOwnClose(request);
    const controller = abortOnDisconnect(reply, options.inFlight, handled, (clientLeft) =>
      options.recordClosed(request, reply, clientLeft),
    );
    let started: Awaited<ReturnType<ChatService["start"]>>;
    try {
      started = await options.chat.start({
        requestId: request.id,
        key: options.getKey(request),
        options: chatOptions,
        signal: controller.signal,
        setHeader: (name, value) => {
          reply.header(name, value);
        },
        annotate: (fields) => options.annotate(request, fields),
        logger: request.log,
      });
    } catch (error) {
      // The client left before anything began (while its model still loaded): no one to answer,
      // and no fault; its close is recorded (499) once the handler is done.
      if (
        controller.signal.aborted &&
        error === controller.signal.reason &&
        cutBy(controller.signal) === undefined
      ) {
        reply.hijack();
        return;
      }
      throw error;
    }
    if (!chatOptions.stream) {
      const completion = await collectCompletion(started.parts);
      // Draining: the client should not send its next request on this connection, whatever
      // the answer is (a request cut by the shutdown gets its 503 with this header too).
      if (options.inFlight.closing) reply.header("connection", "close");
      if (completion.error !== undefined) throw completion.error;
      // Cut by a shutdown: the answer goes out all the same if its settlement charged it (the cut
      // came while the charge was being recorded), else the shutdown's error does.
      const cut = cutBy(controller.signal);
      if (cut !== undefined && started.settledUnanswered() !== false) throw cut;
      reply.send(renderChatCompletion(started.identity, completion));
      closeIfLeftUnread(reply.raw, stallTimeoutMs);
      return reply;
    }
    const renderer = new ChunkRenderer(started.identity, { includeUsage: chatOptions.includeUsage });
    reply.hijack();
    const raw = reply.raw;
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(reply.getHeaders()))
      if (value !== undefined) headers[name] = value;
    raw.writeHead(200, {
      ...headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // Draining, the connection closes after the stream; otherwise Node decides as the client
      // asked (a client that sent `connection: close`, or HTTP/1.0, gets its connection closed).
      ...(options.inFlight.closing ? { connection: "close" } : {}),
      "x-accel-buffering": "no",
    });
    let connected = await writeToClient(raw, renderer.start(), stallTimeoutMs);
    /** The error the stream ended with, after its 200: the log line says so, as the ledger does. */
    let endedWith: AppError | undefined;
    // Read to the end even after the client left: the engine then stops at once and reports
    // what it generated, so the request is settled with the real usage.
    for await (const parts of started.parts) {
      const last = parts.at(-1);
      // Cut by a shutdown (or lost leases): the finish goes out all the same if the settlement
      // recorded the answer as finished (the cut came while its charge was being recorded).
      const cut =
        last?.type === "finish" && started.settledCut() !== false ? cutBy(controller.signal) : undefined;
      endedWith = last?.type === "error" ? last.error : (cut ?? endedWith);
      if (!connected) {
        controller.abort();
        continue;
      }
      connected = await writeToClient(raw, renderer.parts(parts, cut), stallTimeoutMs);
    }
    if (endedWith !== undefined) options.annotate(request, { error: endedWith.code });
    if (connected) endEventStream(raw, stallTimeoutMs);
  }
}
