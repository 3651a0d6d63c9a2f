import type { ChatMessage } from "../engine.ts";
import type { UpstreamMessage } from "./upstream-wire.ts";

/** `message` with the participant's `name`, when the client gave one. */
function withName<Message extends UpstreamMessage>(message: Message, name: string | undefined): Message {
  return name === undefined ? message : { ...message, name };
}

/** Converts the engine's normalised messages back to the OpenAI wire shape (names included). */
export function convertMessages(messages: readonly ChatMessage[]): UpstreamMessage[] {
  return messages.map((message): UpstreamMessage => {
    switch (message.role) {
      case "system":
      case "user":
        return withName({ role: message.role, content: message.content }, message.name);
      case "assistant": {
        const calls = message.toolCalls ?? [];
        if (calls.length === 0)
          return withName({ role: "assistant", content: message.content }, message.name);
        return {
          role: "assistant",
          content: message.content,
          ...(message.name === undefined ? {} : { name: message.name }),
          tool_calls: calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        };
      }
      case "tool":
        return { role: "tool", content: message.content, tool_call_id: message.toolCallId };
      default: {
        const unreachable: never = message;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  });
}
