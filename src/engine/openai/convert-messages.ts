import type { ChatMessage } from "../engine.ts";
import type { UpstreamContent, UpstreamMessage } from "./upstream-wire.ts";

/** `message` with the participant's `name`, when the client gave one. */
function withName<Message extends UpstreamMessage>(message: Message, name: string | undefined): Message {
  return name === undefined ? message : { ...message, name };
}

/**
 * The content as the client sent it: its text parts where it sent parts (the upstream joins them
 * as it does for its own clients), else the text. Fields of a part other than its text (such as
 * `cache_control`) are not passed on: OpenAI refuses what it does not know.
 */
function contentOf<Content extends string | null>(
  message: ChatMessage & { content: Content },
): UpstreamContent | Content {
  const parts = message.contentParts;
  return parts === undefined ? message.content : parts.map((text) => ({ type: "text" as const, text }));
}

/** Converts the engine's normalised messages back to the OpenAI wire shape (names included). */
export function convertMessages(messages: readonly ChatMessage[]): UpstreamMessage[] {
  return messages.map((message): UpstreamMessage => {
    switch (message.role) {
      case "system":
      case "user":
        return withName({ role: message.role, content: contentOf(message) }, message.name);
      case "assistant": {
        const calls = message.toolCalls ?? [];
        if (calls.length === 0)
          return withName({ role: "assistant", content: contentOf(message) }, message.name);
        return {
          role: "assistant",
          content: contentOf(message),
          ...(message.name === undefined ? {} : { name: message.name }),
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        };
      }
      case "tool":
        return { role: "tool", content: contentOf(message), tool_call_id: message.toolCallId };
      default: {
        const unreachable: never = message;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  });
}
