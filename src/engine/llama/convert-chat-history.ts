import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from "node-llama-cpp";
import type { ChatMessage, ToolCall } from "../engine.ts";
import { readToolJson } from "./read-tool-json.ts";

/**
 * Converts a request's messages to node-llama-cpp's chat history.
 *
 * node-llama-cpp keeps a function call and its result inside the model response that made the
 * call: `{type: "model", response: [text, call(with result), ..., text]}`. So an assistant message
 * with `toolCalls` opens a model item, the `tool` messages that follow fill in the results of its
 * calls (matched by id), and a later assistant message with no user turn in between continues the
 * same model item, as the model saw it. A tool result whose call is not in the history (a client
 * error the API layer lets through) becomes a user turn that says what it is, so nothing the client
 * sent is silently dropped.
 */
export function convertChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  /**
   * The calls of the last assistant message by id, in order, and how many of them have their
   * result: an index, not `shift()`, which moves every call left each time (thousands of calls
   * sharing one id made the conversion quadratic).
   */
  let openCalls = new Map<string, { calls: ChatModelFunctionCall[]; answered: number }>();

  const currentModelItem = (): ChatModelResponse => {
    const last = history.at(-1);
    if (last?.type === "model") return last;
    const item: ChatModelResponse = { type: "model", response: [] };
    history.push(item);
    return item;
  };

  for (const message of messages) {
    switch (message.role) {
      case "system":
        history.push({ type: "system", text: message.content });
        openCalls = new Map();
        break;
      case "user":
        history.push({ type: "user", text: message.content });
        openCalls = new Map();
        break;
      case "assistant": {
        const item = currentModelItem();
        if (message.content !== null && message.content !== "") item.response.push(message.content);
        const calls = message.toolCalls ?? [];
        openCalls = new Map();
        calls.forEach((call, index) => {
          const functionCall = convertToolCall(call, index === 0);
          item.response.push(functionCall);
          // Ids are the client's: two calls may share one, and then take their results in turn.
          const sharing = openCalls.get(call.id);
          if (sharing === undefined) openCalls.set(call.id, { calls: [functionCall], answered: 0 });
          else sharing.calls.push(functionCall);
        });
        break;
      }
      case "tool": {
        const open = openCalls.get(message.toolCallId);
        const functionCall = open?.calls[open.answered];
        if (open !== undefined && functionCall !== undefined) open.answered += 1;
        if (functionCall === undefined || history.at(-1)?.type !== "model") {
          history.push({
            type: "user",
            text: `Result of tool call ${message.toolCallId}:\n${message.content}`,
          });
          openCalls = new Map();
        } else {
          functionCall.result = readToolJson(message.content);
        }
        break;
      }
      default: {
        const unreachable: never = message;
        throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
      }
    }
  }
  return history;
}

function convertToolCall(call: ToolCall, startsNewChunk: boolean): ChatModelFunctionCall {
  return {
    type: "functionCall",
    name: call.name,
    params: readToolJson(call.arguments),
    // A call whose result never came back still renders as a call with an empty result.
    result: "",
    startsNewChunk,
  };
}
