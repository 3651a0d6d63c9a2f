import type { ChatMessage } from "../engine.ts";
import type { UpstreamMessage } from "./upstream-wire.ts";

/** Converts the engine's normalised messages back to the OpenAI wire shape. */
export function convertMessages(messages: readonly ChatMessage[]): UpstreamMessage[] {
  return messages.map((message): UpstreamMessage => {
    switch (message.role) {
      case "system":
      case "user":
        return { role: message.role, content: message.content };
      case "assistant": {
        const calls = message.toolCalls ?? [];
        if (calls.length === 0) return { role: "assistant", content: message.content };
        return {
          role: "assistant",
          content: message.content,
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
