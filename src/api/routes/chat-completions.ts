import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ChatService } from "../../chat/chat-service.ts";
import type { RequestKey } from "../../chat/request-key.ts";
import { convertChatRequest } from "../convert-chat-request.ts";
import { collectCompletion, renderChatCompletion } from "../render-chat-completion.ts";
import {
  type ChatCompletionRequestBody,
  ChatCompletionRequestSchema,
} from "../schemas/chat-completion-request.ts";
import { ChunkRenderer } from "../sse.ts";
import { writeToClient } from "../write-event-stream.ts";

/** Aborts when the client goes away before the response is complete. */
function abortOnDisconnect(reply: FastifyReply): AbortController {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller;
}

/** `POST /v1/chat/completions`: validate, hand to the chat service, render JSON or SSE. */
export function registerChatCompletionRoutes(
  app: FastifyInstance,
  options: { chat: ChatService; getKey: (request: object) => RequestKey },
): void {
  app.post<{ Body: ChatCompletionRequestBody }>(
    "/v1/chat/completions",
    { schema: { body: ChatCompletionRequestSchema } },
    async (request, reply) => {
      const chatOptions = convertChatRequest(request.body);
      const controller = abortOnDisconnect(reply);
      const started = await options.chat.start({
        requestId: request.id,
        key: options.getKey(request),
        options: chatOptions,
        signal: controller.signal,
      });
      if (!chatOptions.stream) {
        const completion = await collectCompletion(started.parts);
        if (completion.error !== undefined) throw completion.error;
        return renderChatCompletion(started.identity, completion);
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
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      let connected = await writeToClient(raw, renderer.start());
      // Read to the end even after the client left: the engine then stops at once and reports
      // what it generated, so the request is settled with the real usage.
      for await (const part of started.parts) {
        if (!connected) {
          controller.abort();
          continue;
        }
        connected = await writeToClient(raw, renderer.part(part));
      }
      if (connected) raw.end();
    },
  );
}
