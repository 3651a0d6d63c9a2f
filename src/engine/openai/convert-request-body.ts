import type { ChatRequest, ResponseFormat, ToolChoice, ToolDefinition } from "../engine.ts";
import { convertMessages } from "./convert-messages.ts";
import type {
  UpstreamRequestBody,
  UpstreamResponseFormat,
  UpstreamTool,
  UpstreamToolChoice,
} from "./upstream-wire.ts";

/**
 * The upstream request body for a chat request. The catalogue's `model` name goes upstream (the
 * client only ever sees the catalogue id). The body always asks for a stream with usage, even when
 * the client wants one JSON answer, so usage, timeouts and aborts work the same way for both.
 * Values equal to the API's defaults are left out where some compatible servers reject the field
 * (penalties, empty stop lists, "text" format, tool choice without tools), and sampling settings
 * the client did not send are left to the upstream (OpenAI's reasoning models refuse
 * `temperature` and `top_p` whatever their value). Fields Tollgate does not act on itself
 * (`logit_bias`, `service_tier`, ...: ChatRequest.upstreamExtras) go as the client sent them.
 */
export function convertRequestBody(options: {
  request: ChatRequest;
  model: string;
  /**
   * The `max_tokens` to send, when given (even as `undefined`, which sends none): the engine
   * decides the upstream's bound. Left out, the request's own `max_tokens` goes.
   */
  maxTokens?: number | undefined;
}): UpstreamRequestBody {
  const { request } = options;
  const body: UpstreamRequestBody = {
    model: options.model,
    messages: convertMessages(request.messages),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.topP !== undefined) body.top_p = request.topP;
  const maxTokens = "maxTokens" in options ? options.maxTokens : request.maxTokens;
  if (maxTokens !== undefined) body.max_tokens = maxTokens;
  if (request.frequencyPenalty !== 0) body.frequency_penalty = request.frequencyPenalty;
  if (request.presencePenalty !== 0) body.presence_penalty = request.presencePenalty;
  if (request.stop.length > 0) body.stop = [...request.stop];
  if (request.seed !== undefined) body.seed = request.seed;
  if (request.tools.length > 0) {
    body.tools = request.tools.map(convertTool);
    body.tool_choice = convertToolChoice(request.toolChoice);
    // Only as the client sent it: servers that do not know the field may refuse it.
    if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  }
  if (request.reasoningEffort !== undefined) body.reasoning_effort = request.reasoningEffort;
  const format = convertResponseFormat(request.responseFormat);
  if (format !== undefined) body.response_format = format;
  if (request.user !== undefined) body.user = request.user;
  // Only when asked for: servers that do not know the fields may refuse them.
  if (request.logprobs !== undefined) {
    body.logprobs = true;
    if (request.logprobs.top !== undefined) body.top_logprobs = request.logprobs.top;
  }
  // The fields only an upstream acts on, as sent; their names are none of the above.
  if (request.upstreamExtras !== undefined) Object.assign(body, request.upstreamExtras);
  return body;
}

function convertTool(tool: ToolDefinition): UpstreamTool {
  return {
    type: "function",
    function: {
      name: tool.name,
      ...(tool.description === undefined ? {} : { description: tool.description }),
      ...(tool.parameters === undefined ? {} : { parameters: tool.parameters }),
      ...(tool.strict === undefined ? {} : { strict: tool.strict }),
    },
  };
}

function convertToolChoice(choice: ToolChoice): UpstreamToolChoice {
  switch (choice.type) {
    case "none":
    case "auto":
    case "required":
      return choice.type;
    case "function":
      return { type: "function", function: { name: choice.name } };
    default: {
      const unreachable: never = choice;
      throw new Error(`unknown tool choice ${JSON.stringify(unreachable)}`);
    }
  }
}

function convertResponseFormat(format: ResponseFormat): UpstreamResponseFormat | undefined {
  switch (format.type) {
    case "text":
      return undefined;
    case "json_object":
      return { type: "json_object" };
    case "json_schema":
      return {
        type: "json_schema",
        json_schema: {
          name: format.name,
          ...(format.description === undefined ? {} : { description: format.description }),
          schema: format.schema,
          ...(format.strict === undefined ? {} : { strict: format.strict }),
        },
      };
    default: {
      const unreachable: never = format;
      throw new Error(`unknown response format ${JSON.stringify(unreachable)}`);
    }
  }
}
